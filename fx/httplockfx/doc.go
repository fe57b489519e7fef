// Package httplockfx wires the net/http lock middleware of package httplock
// (github.com/lockgate/lockgate/middleware/nethttp) into an fx application.
// Module provides a *Factory built from the *core.Locker in the graph (see
// package lockfx) and the httplock options of the OptionsGroup group, which
// apply to every route; routes then get their middleware in one line:
//
//	mux.Handle("POST /voucher-order/seckill/{voucher}",
//		f.Must("order:{query.user_id}:{path.voucher}")(handler))
//
// The middleware holds no resources, so the module registers no lifecycle
// hook; the Locker is closed by lockfx.
package httplockfx
