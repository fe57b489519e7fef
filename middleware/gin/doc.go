// Package ginlock (folder middleware/gin, a Go module of its own) is Gin
// middleware that runs the rest of a route's chain while holding a
// distributed lock whose key is derived from the request:
//
//	lock := ginlock.Must(ginlock.New(locker, "order:{query.user_id}:{path.voucher}"))
//	r.POST("/voucher-order/seckill/:voucher", lock, handler)
//	r.POST("/exports", ginlock.Must(ginlock.New(locker, "export:{query.tenant}", ginlock.WithLimit(3))), export) // 3 at once per tenant
//	r.GET("/vouchers/:id", ginlock.Must(ginlock.New(locker, "voucher:{path.id}", ginlock.WithShared())), show) // readers together, an exclusive route of the key alone
//
// The package is named ginlock so that it does not shadow gin.
//
// The key template (package keyfunc) reads route parameters (c.Param), the
// query, headers, form fields and JSON body fields (the body is read once,
// bounded by WithMaxBodySize, and replayed to the handler, so c.PostForm,
// c.ShouldBindJSON and c.GetRawData see it whole), and values earlier
// middleware stored with c.Set or in the request context
// (keyfunc.WithValue), read by {ctx.name} (WithContextValue to read them
// otherwise). A bare {name} tries path, query, form, body, header in that
// order. Typed placeholders ({query.user_id:int}, {path.id:uint},
// {header.X-Tenant:uuid}) build the key from the value the handler will
// parse: "01", "+1" and "1" lock the same key, and "x" is a 400.
//
// Setup errors, answers and defaults are every adapter's, written once in
// middleware/README.md in the repository (Setup, Defaults, Answers, Under
// the lock). New returns a bad Locker, template or option as an error
// naming the option (Must panics with it), so that it never reaches a
// request; each option's doc gives its default. What is Gin's: every
// answer aborts the chain (the handler does not run), WithBusyHandler and
// WithErrorHandler replace the answers, and WithSkip skips the middleware.
//
// Otherwise the chain runs (c.Next()) with c.Request's context set to the
// lease's Context: FromContext(c.Request.Context()) and FromGin(c) return
// the lease. It is released after c.Next() returns or a handler panics
// (use gin.Recovery in front, as usual), and the middleware in front sees
// its own c.Request again afterwards.
//
// # Which context to pass
//
// A Gin handler holds two contexts. c.Request.Context() always carries the
// lease: pass it to Lock, to the database, to everything the lock
// protects. The *gin.Context c is itself a context.Context, but by default
// (engine.ContextWithFallback false) it reads nothing from the request:
// FromContext(c) is nil, a Lock with c does not re-enter (it waits for the
// route's own lock and ends busy), and c.Done() is never closed, so work
// given c is not cancelled when the lock is lost. Pass c itself only on an
// engine with ContextWithFallback set to true, where c's Value, Done, Err
// and Deadline are those of c.Request.Context().
package ginlock
