// Package lockfx wires a *core.Locker into an fx application: Module
// provides it, built with core.New from the redis.UniversalClient already in
// the graph, and shuts it down gracefully when the application stops: the
// contexts of the leases still held are cancelled (cause core.ErrClosed) and
// their locks released in Redis within fx's stop timeout, so a rolling
// deploy does not leave in-flight locks held for their TTL. The client
// itself belongs to whoever built it and is never closed here.
//
//	app := fx.New(
//		fx.Provide(func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }),
//		fx.Supply(&lockfx.Config{Prefix: "shop:", TTL: 10 * time.Second}), // optional
//		lockfx.Options(core.WithObserver(obs)),                            // optional
//		lockfx.Module,
//		fx.Invoke(func(l *core.Locker) { ... }),
//	)
//
// Config and Options are checked by core.New when the graph is built: a bad
// value (a TTL below core.MinTTL, a prefix with a brace, a nil option, ...)
// fails the application's start with core's error, naming the field.
//
// Packages core, keyfunc, the middleware and the interceptor do not import
// fx; only these fx packages do, so an application without fx never compiles
// it.
package lockfx
