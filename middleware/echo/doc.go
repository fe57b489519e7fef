// Package echolock (folder middleware/echo, a Go module of its own) is Echo
// v4 middleware that runs a handler while holding a distributed lock whose
// key is derived from the request:
//
//	lock := echolock.Must(echolock.NewWithConfig(echolock.Config{
//		Locker: locker,
//		Key:    "order:{query.user_id:int}:{path.voucher}",
//	}))
//	e.POST("/voucher-order/seckill/:voucher", order, lock)
//	e.POST("/exports", export, echolock.Must(echolock.NewWithConfig(echolock.Config{Locker: locker, Key: "export:{query.tenant}", Limit: 3}))) // 3 at once per tenant
//	e.GET("/vouchers/:id", show, echolock.Must(echolock.NewWithConfig(echolock.Config{Locker: locker, Key: "voucher:{path.id}", Shared: true}))) // readers together, an exclusive route of the key alone
//
//	func order(c echo.Context) error {
//		lease := echolock.FromContext(c.Request().Context())
//		// ... the critical section, with lease.Context() and lease.Fence()
//	}
//
// New(locker, key) is the same with every other field at its default. The
// package is named echolock so that it does not shadow echo.
//
// The key template (package keyfunc) reads route parameters (c.Param of
// ":voucher", percent-decoded as net/http's PathValue does: "/v/a:b" and
// "/v/a%3Ab" lock the same key), the query, headers, form fields and JSON
// body fields (the body is read once, bounded by Config.MaxBodySize, and
// replayed to the handler, for c.Bind and c.FormValue alike), and values
// earlier middleware stored with c.Set or in the request context
// (keyfunc.WithValue), read by {ctx.name}. Typed placeholders
// ({query.user_id:int}, {path.id:uint}, {header.X-Tenant:uuid}) build the
// key from the value the handler will parse: "01", "+1" and "1" lock the
// same key, and "x" is a 400.
//
// Setup errors, answers and defaults are every adapter's, written once in
// middleware/README.md in the repository (Setup, Defaults, Answers, Under
// the lock); each Config field's doc gives its default. NewWithConfig
// returns a bad Config as an error naming the field (Must panics with it),
// so that it never reaches a request. What is Echo's: BusyHandler and
// ErrorHandler replace the answers (below), Skipper skips the middleware,
// and under the lock c.Request()'s context is the lease's Context
// (FromContext returns the lease); the lease is released when the rest of
// the chain returns, with nil, with an error, or by a panic (which goes on
// to Echo's Recover middleware).
//
// # Errors and Echo's HTTPErrorHandler
//
// Echo's middleware usually return an *echo.HTTPError and let the app's
// HTTPErrorHandler write it. The default answers of this package do not:
// they are written by the middleware ({"error": "..."}, Content-Type
// application/json; charset=utf-8, the bytes httplock writes) and the
// middleware returns nil. Echo's DefaultHTTPErrorHandler would write
// {"message": "..."}, an app's own handler anything, and c.JSON indents in
// Debug mode or for a ?pretty query; writing the answer keeps it the same
// across every lockgate adapter and every app configuration, and the app's
// HTTPErrorHandler is not called for it (the status is still in
// c.Response().Status for access logs).
//
// To have the app's HTTPErrorHandler write them instead, return the error
// from the replaceable answers; what BusyHandler and ErrorHandler return,
// the middleware returns:
//
//	ErrorHandler: func(c echo.Context, status int, err error) error {
//		return echo.NewHTTPError(status).SetInternal(err) // err is internal: keep it out of Message
//	},
//	BusyHandler: func(c echo.Context, err error) error {
//		return echo.NewHTTPError(http.StatusTooManyRequests).SetInternal(err) // Retry-After is already set
//	},
//
// An error the handler returns is not the middleware's: it goes on to the
// app's HTTPErrorHandler as usual, which runs after the lock is released.
package echolock
