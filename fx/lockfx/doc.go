// Package lockfx wires a *core.Locker into an fx application: Module
// provides it from the redis.UniversalClient already in the graph and closes
// it when the application stops. The client itself belongs to whoever built
// it and is never closed here.
//
//	app := fx.New(
//		fx.Provide(func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }),
//		fx.Supply(&lockfx.Config{Prefix: "shop:", TTL: 10 * time.Second}), // optional
//		lockfx.Options(core.WithObserver(obs)),                            // optional
//		lockfx.Module,
//		fx.Invoke(func(l *core.Locker) { ... }),
//	)
//
// Packages core, keyfunc, the middleware and the interceptor do not import
// fx; only these fx packages do, so an application without fx never compiles
// it.
package lockfx
