// Package httplock (folder middleware/nethttp) is net/http middleware that
// runs a handler while holding a distributed lock whose key is derived from
// the request:
//
//	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}"))
//	mux.Handle("POST /voucher-order/seckill/{voucher}", lock(handler))
//
// WithLimit(n) admits n requests of one key at once instead of one (a
// semaphore of n permits; over it, 429 as for a busy lock), for a
// concurrency limit per key:
//
//	mux.Handle("POST /exports", httplock.Must(httplock.New(locker, "export:{query.tenant}", httplock.WithLimit(3)))(export))
//
// WithShared() takes the key's lock shared (a read lock): the readers of a
// key run together, a route locking it without the option excludes them
// and is not overtaken by later readers:
//
//	mux.Handle("GET /vouchers/{id}", httplock.Must(httplock.New(locker, "voucher:{path.id}", httplock.WithShared()))(show))
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
// Setup errors, answers and defaults are every adapter's, written once in
// middleware/README.md in the repository (Setup, Defaults, Answers, Under
// the lock). New returns a bad Locker, template or option as an error
// naming the option (Must panics with it), so that it never reaches a
// request; each option's doc gives its default. WithBusyHandler and
// WithErrorHandler replace the answers. Under the lock the handler runs
// with r.Context() set to the lease's Context (FromContext returns the
// lease); the lease is released after the handler returns or panics (the
// panic goes on to the server).
package httplock
