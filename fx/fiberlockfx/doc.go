// Package fiberlockfx wires the Fiber v2 lock middleware of package
// fiberlock (github.com/lockgate/lockgate/middleware/fiber) into an fx
// application. Module provides a *Factory built from the *core.Locker in
// the graph (see package lockfx) and an optional *Defaults; routes then get
// their middleware in one line:
//
//	app.Post("/voucher-order/seckill/:voucher", f.Key("order:{query.user_id}:{path.voucher}"), handler)
//
// The middleware holds no resources, so the module registers no lifecycle
// hook; the Locker is closed by lockfx.
package fiberlockfx
