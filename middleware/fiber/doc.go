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
// Outcomes are every adapter's; middleware/README.md in the repository has
// them all, with the setup errors and the defaults. In short: a key error
// is a 400 naming the part, never the value, and nothing is locked; a body
// over MaxBodySize a 413; a lock still busy when the wait ends
// (Config.Wait) a 429 with Retry-After (Config.LimitReached replaces it);
// Redis unavailable, the user context's deadline passed while waiting, a
// closed Locker or an unsupported Redis a 503, and the handler does not
// run (Config.FailOpen runs it without the lock when Redis is unavailable,
// and only then); a user context cancelled while waiting a 499
// (StatusClientClosedRequest). Fiber's user context is never cancelled
// unless earlier middleware set one that is.
//
// Otherwise the handler runs with FromContext(c) returning the lease (Key,
// Fence) and c.UserContext() set to the lease's Context: a Lock of the same
// key with it re-enters, and it is cancelled with cause core.ErrLockLost if
// the lock is lost while the handler runs. The lease is released after the
// handler returns, returns an error, or panics (use Fiber's recover
// middleware in front, as usual), within Config.ReleaseTimeout.
//
// Internal error texts are never sent to the client; Config.ErrorHandler
// replaces the default answers.
package fiberlock
