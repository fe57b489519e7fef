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
// Outcomes are every adapter's; middleware/README.md in the repository has
// them all, with the setup errors and the defaults. In short: a key error
// is a 400 naming the part, never the value, and nothing is locked; a body
// over WithMaxBodySize a 413; a lock still busy when the wait ends
// (WithWait) a 429 with Retry-After (WithBusyHandler replaces it); Redis
// unavailable, the request's deadline passed while waiting, a closed
// Locker or an unsupported Redis a 503, and the handler does not run
// (WithFailOpen runs it without the lock when Redis is unavailable, and
// only then); a request cancelled while waiting a 499
// (StatusClientClosedRequest). Otherwise the handler runs with r.Context()
// set to the lease's Context: FromContext returns the lease (Key, Fence), a
// Lock of the same key with the context re-enters, and the context is
// cancelled with cause core.ErrLockLost if the lock is lost while the
// handler runs. The lease is released after the handler returns or panics
// (the panic goes on to the server), within the release timeout
// (WithReleaseTimeout).
//
// Internal error texts are never sent to the client; WithErrorHandler
// replaces the default answers.
package httplock
