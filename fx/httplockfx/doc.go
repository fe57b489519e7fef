// Package httplockfx wires the net/http lock middleware of package httplock
// (github.com/lockgate/lockgate/middleware/nethttp) into an fx application.
// Module provides a *Factory built from the *core.Locker in the graph (see
// package lockfx) and the httplock options of the OptionsGroup group
// (added with Options), which apply to every route; routes then get their
// middleware in one line:
//
//	mux.Handle("POST /voucher-order/seckill/{voucher}",
//		f.Must("order:{query.user_id}:{path.voucher}")(handler))
//
// NewFactory checks the module-wide options as httplock.New does, so a bad
// one (httplock.WithTTL below core.MinTTL, say) fails the application's
// start instead of every route; a route's own bad option is an error of
// Factory.New (a panic of Factory.Must) at route setup.
//
// The middleware holds no resources, so the module registers no lifecycle
// hook; the Locker is shut down by lockfx.
package httplockfx
