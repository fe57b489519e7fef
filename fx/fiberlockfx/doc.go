// Package fiberlockfx wires the Fiber v2 lock middleware of package
// fiberlock (github.com/lockgate/lockgate/middleware/fiber) into an fx
// application. Module provides a *Factory built from the *core.Locker in
// the graph (see package lockfx) and an optional *Defaults; routes then get
// their middleware in one line:
//
//	app.Post("/voucher-order/seckill/:voucher", f.Key("order:{query.user_id}:{path.voucher}"), handler)
//
// Defaults carries the fiberlock.Config fields that apply to every route
// (not the Locker or the key) and NewFactory checks them as fiberlock.New
// checks a Config (fiberlock.Validate), so bad Defaults (a TTL below
// core.MinTTL, say) fail the application's start instead of every route; a
// route's own bad Config panics in Factory.New at route setup, as
// fiberlock.New does. Unlike httplockfx there is no value group of
// options: Fiber middleware is configured by one struct, and several
// Defaults merged in fx's unspecified group order would have no
// well-defined result, so the graph holds at most one *Defaults.
//
// The middleware holds no resources, so the module registers no lifecycle
// hook; the Locker is shut down by lockfx.
package fiberlockfx
