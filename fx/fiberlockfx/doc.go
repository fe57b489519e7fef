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
// fiberlock.New does. As httplockfx has a value group of options, Options
// adds pieces of Defaults from several modules (OptionsGroup); since fx
// gives a value group in no order, the pieces are merged field by field and
// a field set by two of them fails the start, naming it, rather than one
// winning by chance.
//
// The middleware holds no resources, so the module registers no lifecycle
// hook; the Locker is shut down by lockfx.
package fiberlockfx
