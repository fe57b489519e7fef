// Package ginlock (folder middleware/gin, a Go module of its own) is Gin
// middleware that runs the rest of a route's chain while holding a
// distributed lock whose key is derived from the request:
//
//	lock := ginlock.Must(ginlock.New(locker, "order:{query.user_id}:{path.voucher}"))
//	r.POST("/voucher-order/seckill/:voucher", lock, handler)
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
// Setup: New checks the Locker, the template and every option (each
// option's own checks, then core.Combine of the lock options) and returns
// the error, naming the option; Must turns it into a panic for one-line
// setup. A bad option never reaches a request, so it can neither answer
// 503 to every request nor, with WithFailOpen, run them all without the
// lock.
//
// Each option's doc gives its default. Outcomes are every adapter's;
// middleware/README.md in the repository has them all, with the setup
// errors and the defaults. In short, and every answer aborts the chain (the
// handler does not run): a key error is a 400 naming the part, never the
// value, and nothing is locked; a body over WithMaxBodySize a 413; a lock
// still busy when the wait ends (WithWait) a 429 with Retry-After
// (WithBusyHandler replaces it); Redis unavailable, the request's deadline
// passed while waiting, a closed Locker or an unsupported Redis a 503
// (WithFailOpen runs the chain without the lock, FromContext nil, when
// Redis is unavailable, and only then); a request cancelled while waiting
// a 499 (StatusClientClosedRequest).
//
// Otherwise the chain runs (c.Next()) with c.Request's context set to the
// lease's Context: FromContext(c.Request.Context()) and FromGin(c) return
// the lease (Key, Fence), a Lock of the same key with that context
// re-enters, and it is cancelled with cause core.ErrLockLost if the lock
// is lost while the handler runs. The lease is released after c.Next()
// returns or a handler panics (use gin.Recovery in front, as usual), also
// when the request's context is already over, within the release timeout;
// a failed release is logged at warn. The middleware in front sees its own
// c.Request again afterwards.
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
//
// Internal error texts are never sent to the client; WithErrorHandler
// replaces the default answers.
package ginlock
