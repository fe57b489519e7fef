// Package fiberlock (folder middleware/fiber) is Fiber v2 middleware that
// runs a handler while holding a distributed lock whose key is derived from
// the request, in one line:
//
//	app.Post("/voucher-order/seckill/:voucher",
//		fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}"}),
//		handler)
//
// The package is named fiberlock so that it does not shadow fiber.
//
// The key template (package keyfunc) reads route parameters (c.Params,
// percent-decoded as net/http's PathValue is, unless the app's UnescapePath
// already decoded them: /seckill/%37 is the lock of voucher 7), the query, headers, form fields, JSON body fields (bounded by
// Config.MaxBodySize) and values earlier middleware stored in c.Locals or in
// the user context (keyfunc.WithValue), read by {ctx.name}. Typed
// placeholders ({query.user_id:int}, {path.id:uint},
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
// Outcomes, as for package httplock:
//   - key error (missing, empty, too long, control characters, a typed
//     value that does not parse, body not JSON): 400 with {"error": "..."}
//     naming the part, never the value; nothing is locked.
//   - body over MaxBodySize: 413.
//   - still busy when the wait ends (Config.Wait, default the Locker's 2s):
//     429 with Retry-After = core.RetryAfterSeconds (when the lock is likely
//     free, whole seconds, at least 1); Config.LimitReached replaces it.
//   - Redis unavailable (core.ErrUnavailable): 503 and the handler does not
//     run; Config.FailOpen runs it without the lock and logs a warning.
//     Fail-open applies to core.ErrUnavailable only.
//   - the user context's deadline passed while waiting (a plain
//     context.DeadlineExceeded): 503 saying so; it was cancelled (a plain
//     context.Canceled): 499 (StatusClientClosedRequest, "client closed
//     request", as nginx). Fiber's user context is never cancelled unless
//     earlier middleware set one that is.
//   - the Locker closed, an unsupported Redis, anything else: 503, logged at
//     error, never fail-open.
//   - otherwise the handler runs with FromContext(c) returning the lease
//     (Key, Fence) and c.UserContext() set to the lease's Context: a Lock of
//     the same key with it re-enters, and it is cancelled with cause
//     core.ErrLockLost if the lock is lost while the handler runs. The lease
//     is released after the handler returns, returns an error, or panics
//     (use Fiber's recover middleware in front, as usual), within
//     Config.ReleaseTimeout (default the Locker's 1s), also when the user
//     context is already over; a failed release is logged at warn.
//
// Internal error texts are never sent to the client; Config.ErrorHandler
// replaces the default answers.
package fiberlock
