// Package httplock (folder middleware/nethttp) is net/http middleware that
// runs a handler while holding a distributed lock whose key is derived from
// the request:
//
//	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}"))
//	mux.Handle("POST /voucher-order/seckill/{voucher}", lock(handler))
//
// The package is named httplock so that it does not shadow net/http.
//
// The key template (package keyfunc) reads path parameters with
// (*http.Request).PathValue by default (set by http.ServeMux and by chi
// v5.5+, see middleware/chi; WithPathValue for other routers), the query,
// headers, form fields and JSON body fields (the body is read once,
// bounded by WithMaxBodySize, and replayed to the handler), and values
// that earlier middleware stored in the context
// (keyfunc.WithValue, read by {ctx.name}). Typed placeholders
// ({query.user_id:int}, {path.id:uint}, {header.X-Tenant:uuid}) build the
// key from the value the handler will parse: "01", "+1" and "1" lock the
// same key, and "x" is a 400.
//
// Setup: New checks the Locker, the template and every option (each
// option's own checks, then core.Combine of the lock options) and returns
// the error; Must turns it into a panic for one-line setup. A bad option
// never reaches a request, so it can neither answer 503 to every request
// nor, with WithFailOpen, run them all without the lock.
//
// Outcomes:
//   - key error (missing, empty, too long, control characters, a typed
//     value that does not parse, body not JSON): 400 with {"error": "..."}
//     naming the part, never the value; nothing is locked.
//   - body over the bound: 413.
//   - lock still busy when the wait ends (WithWait, default the Locker's
//     2s): 429 with Retry-After = core.RetryAfterSeconds (when the lock is
//     likely free, whole seconds, at least 1); WithBusyHandler replaces it.
//   - Redis unavailable (core.ErrUnavailable: unreachable, failing, or no
//     answer within the wait budget): 503 and the handler does not run;
//     WithFailOpen runs it without the lock and logs a warning. Fail-open
//     applies to core.ErrUnavailable only.
//   - the request's deadline passed while waiting (a plain
//     context.DeadlineExceeded): 503 saying so.
//   - the request was cancelled while waiting (a plain context.Canceled):
//     499 (StatusClientClosedRequest, "client closed request", as nginx).
//   - the Locker closed, an unsupported Redis, anything else: 503, logged at
//     error, never fail-open.
//   - otherwise the handler runs with r.Context() set to the lease's
//     Context: FromContext returns the lease (Key, Fence), a Lock of the
//     same key with the context re-enters, and the context is cancelled
//     with cause core.ErrLockLost if the lock is lost while the handler
//     runs. The lease is released after the handler returns or panics (the
//     panic goes on to the server), also when the request's context is
//     already over, within the release timeout (WithReleaseTimeout, default
//     the Locker's 1s); a failed release is logged at warn.
//
// Internal error texts are never sent to the client; WithErrorHandler
// replaces the default answers.
package httplock
