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
// The key template (package keyfunc) reads route parameters (c.Params), the
// query, headers, form fields, JSON body fields (bounded by
// Config.MaxBodySize) and values earlier middleware stored in c.Locals or in
// the user context (keyfunc.WithValue), read by {ctx.name}.
//
// Outcomes, as for package httplock:
//   - key error (missing, empty, too long, control characters, body not
//     JSON): 400 with {"error": "..."} naming the part; nothing is locked.
//   - body over MaxBodySize: 413.
//   - still busy when the wait ends (Config.Wait, default the Locker's 2s):
//     429 with Retry-After in whole seconds rounded up from the holder's
//     remaining TTL; Config.LimitReached replaces the answer.
//   - Redis unreachable or another lock failure: 503 and the handler does not
//     run; Config.FailOpen runs it without the lock and logs a warning.
//   - otherwise the handler runs with Lease(c) returning the lease (Key,
//     Fence) and c.UserContext() set to the lease's Context: a Lock with it
//     re-enters, and it is cancelled with cause core.ErrLockLost if the lock
//     is lost while the handler runs. The lease is released after the
//     handler returns, returns an error, or panics (use Fiber's recover
//     middleware in front, as usual).
package fiberlock
