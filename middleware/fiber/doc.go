// Package fiberlock (folder middleware/fiber) is Fiber v2 middleware that
// runs a handler while holding a distributed lock whose key is derived from
// the request, in one line:
//
//	app.Post("/voucher-order/seckill/:voucher",
//		fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}"}),
//		handler)
//	app.Post("/exports", fiberlock.New(fiberlock.Config{Locker: l, Key: "export:{query.tenant}", Limit: 3}), export) // 3 at once per tenant
//	app.Get("/vouchers/:id", fiberlock.New(fiberlock.Config{Locker: l, Key: "voucher:{path.id}", Shared: true}), show) // readers together, an exclusive route of the key alone
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
// Setup errors, answers and defaults are every adapter's, written once in
// middleware/README.md in the repository (Setup, Defaults, Answers, Under
// the lock); each Config field's doc gives its default. What is Fiber's:
// New panics on a bad config, like Fiber's own middleware (Validate
// returns the error instead), so that it never reaches a request;
// Config.LimitReached and Config.ErrorHandler replace the answers, and
// Config.Next skips the middleware. The wait is bounded by the user
// context (c.UserContext()), which Fiber never cancels unless earlier
// middleware set one that is. Under the lock FromContext(c) returns the
// lease and c.UserContext() is the lease's Context; the lease is released
// after the handler returns, returns an error, or panics (use Fiber's
// recover middleware in front, as usual).
package fiberlock
