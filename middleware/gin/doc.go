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
// Options and their defaults:
//   - WithWait: the Locker's wait (2s unless set in core.New); core.NoWait
//     makes a single attempt.
//   - WithTTL: the Locker's TTL (30s unless set in core.New), renewed by the
//     watchdog while the handler runs; at least core.MinTTL.
//   - WithReleaseTimeout: the Locker's (1s unless set in core.New).
//   - WithMaxBodySize: keyfunc.DefaultMaxBodySize (1 MiB), read only when
//     the key uses the body or the form.
//   - WithFailOpen: off (fail closed).
//   - WithLogger: slog.Default().
//   - WithLockOptions: none.
//   - WithBusyHandler: 429 with {"error": "resource is busy, retry later"}.
//   - WithErrorHandler: the status with {"error": "..."}.
//   - WithSkip: nil, nothing skipped.
//   - WithContextValue: c.Get(name), then keyfunc.ContextValue.
//
// Outcomes (every answer aborts the chain: the handler does not run):
//
//	status  when
//	400     key error (missing, empty, too long, control characters, a
//	        typed value that does not parse, body not JSON), naming the
//	        part, never the value; nothing is locked
//	413     body over WithMaxBodySize
//	429     lock still busy when the wait ends; Retry-After is
//	        core.RetryAfterSeconds (when the lock is likely free, whole
//	        seconds, at least 1); WithBusyHandler replaces the answer
//	503     Redis unavailable (core.ErrUnavailable): the handler does not
//	        run; WithFailOpen runs it without the lock (FromContext nil)
//	        and logs a warning — fail-open applies to core.ErrUnavailable
//	        only
//	503     the request's deadline passed while waiting (a plain
//	        context.DeadlineExceeded), saying so
//	499     the request was cancelled while waiting (a plain
//	        context.Canceled): StatusClientClosedRequest, as nginx logs it
//	503     the Locker closed, an unsupported Redis, anything else: logged
//	        at error, never fail-open
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
