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
// Setup: New checks the whole Config (the Locker, the template, Wait, TTL,
// ReleaseTimeout, MaxBodySize, and LockOptions through core.Combine) and,
// like Fiber's own middleware, panics on a mistake; Validate returns the
// same error instead. A bad config never reaches a request, so it can
// neither answer 503 to every request nor, with FailOpen, run them all
// without the lock.
//
// Outcomes are every adapter's; middleware/README.md in the repository has
// them all, with the setup errors and the defaults. In short: a key error
// is a 400 naming the part, never the value, and nothing is locked; a body
// over MaxBodySize a 413; a lock still busy when the wait ends
// (Config.Wait) a 429 with Retry-After (Config.LimitReached replaces it);
// Redis unavailable, the request context's (c.Context()) deadline passed
// while waiting, a closed Locker or an unsupported Redis a 503, and the
// handler does not run (Config.FailOpen runs it without the lock when
// Redis is unavailable, and only then); a request context cancelled while
// waiting a 499 (StatusClientClosedRequest). Fiber's request context is
// never cancelled unless earlier middleware (timeout.New, say) set one
// that is.
//
// Otherwise the handler runs with FromContext(c) returning the lease (Key,
// Fence) and c.Context() set to the lease's Context: a Lock of the same
// key with it re-enters, and it is cancelled with cause core.ErrLockLost if
// the lock is lost while the handler runs. The lease is released after the
// handler returns, returns an error, or panics (use Fiber's recover
// middleware in front, as usual), within Config.ReleaseTimeout.
//
// Internal error texts are never sent to the client; Config.ErrorHandler
// replaces the default answers.
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
