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
// (*http.Request).PathValue by default (WithPathValue for chi and other
// routers), the query, headers, form fields and JSON body fields (the body
// is read once, bounded by WithMaxBodySize, and replayed to the handler),
// and values that earlier middleware stored in the context
// (keyfunc.WithValue, read by {ctx.name}).
//
// Outcomes:
//   - key error (missing, empty, too long, control characters, body not
//     JSON): 400 with {"error": "..."} naming the part; nothing is locked.
//   - body over the bound: 413.
//   - lock still busy when the wait ends (WithWait, default the Locker's
//     2s): 429 with Retry-After in whole seconds rounded up from the
//     holder's remaining TTL (at least 1); WithBusyHandler replaces it.
//   - Redis unreachable or another lock failure: 503 and the handler does
//     not run; WithFailOpen runs it without the lock and logs a warning.
//   - otherwise the handler runs with r.Context() set to the lease's
//     Context: FromContext returns the lease (Key, Fence), a Lock with the
//     context re-enters the same lock, and the context is cancelled with
//     cause core.ErrLockLost if the lock is lost while the handler runs. The
//     lease is released after the handler returns or panics (the panic goes
//     on to the server).
package httplock
