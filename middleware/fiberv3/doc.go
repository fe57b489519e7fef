// Package fiberlock (folder middleware/fiberv3, a module of its own) is
// Fiber v3 middleware that runs a handler while holding a distributed lock
// whose key is derived from the request, in one line:
//
//	app.Post("/voucher-order/seckill/:voucher",
//		fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}"}),
//		func(c fiber.Ctx) error {
//			lease := fiberlock.FromContext(c)
//			ctx := c.Context() // the lease's Context: pass it on
//			...
//		})
//	app.Post("/exports", fiberlock.New(fiberlock.Config{Locker: l, Key: "export:{query.tenant}", Limit: 3}), export) // 3 at once per tenant
//	app.Get("/vouchers/:id", fiberlock.New(fiberlock.Config{Locker: l, Key: "voucher:{path.id}", Shared: true}), show) // readers together, an exclusive route of the key alone
//
// The package is named fiberlock so that it does not shadow fiber; it is
// the same name as the Fiber v2 adapter (middleware/fiber), and a program
// imports one of them.
//
// The key template (package keyfunc) reads route parameters (c.Params,
// percent-decoded once, as net/http's r.PathValue: /seckill/%37 is the lock
// of /seckill/7; a bad escape is a 400; an app with UnescapePath has them
// decoded already and they are not decoded again), the query, headers, form fields, JSON body fields (bounded by
// Config.MaxBodySize) and values earlier middleware stored in c.Locals or in
// the request context (c.Context(), keyfunc.WithValue), read by {ctx.name}.
// Typed placeholders ({query.user_id:int}, {path.id:uint},
// {header.X-Tenant:uuid}) build the key from the value the handler will
// parse: "01", "+1" and "1" lock the same key, and "x" is a 400.
//
// Setup errors, answers and defaults are every adapter's, written once in
// middleware/README.md in the repository (Setup, Defaults, Answers, Under
// the lock); each Config field's doc gives its default. What is Fiber's:
// New panics on a bad config, like Fiber's own middleware (Validate
// returns the error instead), so that it never reaches a request;
// Config.LimitReached and Config.ErrorHandler replace the answers, and
// Config.Next skips the middleware. The wait is bounded by the request
// context (c.Context()), which Fiber never cancels unless earlier
// middleware (timeout.New, say) set one that is. Under the lock
// FromContext(c) returns the lease and c.Context() is the lease's Context;
// the lease is released after the handler returns, returns an error, or
// panics (use Fiber's recover middleware in front, as usual).
//
// # The fiber.Ctx and c.Context()
//
// A v3 fiber.Ctx is a context.Context, but not the request's: with Fiber's
// default Ctx its Done and Err never fire and its Value reads c.Locals
// only (Fiber documents this as a fasthttp limitation). The lease lives in
// c.Context(), as the cancellation of Fiber's own timeout middleware does.
// So, inside the handler:
//   - FromContext(c) and FromContext(c.Context()) both return the lease.
//   - Pass c.Context() — not c — to Locker.Lock (re-entry), to Redis and to
//     anything that must stop when the lock is lost. A Lock of the held key
//     with c itself does not see the lease: it is a fresh acquisition that
//     waits for the request's own lock and ends busy.
//
// # With Fiber's timeout middleware
//
// Fiber v3's timeout middleware (middleware/timeout) runs what it wraps in
// a goroutine and answers 408 at the timeout without waiting for it. Put
// it in front of the lock, app.Use(timeout.New(func(c fiber.Ctx) error {
// return c.Next() }, cfg)): the wait for the lock is bounded by the
// timeout (c.Context()'s deadline) and the lock is held until the handler
// has returned, even after the 408. Wrapping only the handler behind the
// lock, fiberlock.New(...), timeout.New(handler), releases the lock at the
// timeout while the handler may still run: its c.Context() is over then,
// as for a lost lock, but the critical section is no longer exclusive.
//
// # From the v2 adapter
//
// The Config, the outcomes and the answers are those of middleware/fiber;
// what changes for a program moving from Fiber v2:
//   - handlers and Config callbacks (Next, LimitReached, ErrorHandler,
//     ContextValue) take a fiber.Ctx (an interface) instead of *fiber.Ctx.
//   - c.UserContext() and c.SetUserContext are gone: the lease's Context is
//     c.Context() (v2's c.Context() was the *fasthttp.RequestCtx, now
//     c.RequestCtx()); earlier middleware sets the request context with
//     c.SetContext, which {ctx.name}, the 499/503 outcomes and the lease's
//     Context derive from.
//   - FromContext takes a context.Context: the fiber.Ctx itself, or
//     c.Context() (also in code that has only the context).
//   - two fiberlock middlewares on one route: after the inner one returns,
//     FromContext(c) is the outer lease again (v2: nil).
package fiberlock
