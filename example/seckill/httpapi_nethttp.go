package seckill

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// idsKey carries the checked ids in the request context, from the check
// to the handler, on the net/http stacks (nethttp, chi, gin, echo): a
// request context survives every one of their lock middlewares, which
// derive the lease's context from it.
type idsKey struct{}

// NewHTTPHandler is NewFiberApp on net/http (serve -http nethttp): the
// same routes, checks and outcomes on a ServeMux. With LockRedis the order
// route is wrapped by the lockgate net/http middleware (httplock). Serve
// it with NewHTTPServer, which sets the timeouts.
// Errors: as NewFiberApp.
func NewHTTPHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("GET /vouchers/{voucher_id}", cfg.httpVoucher)
	mux.Handle("POST /voucher-order/seckill/{voucher_id}", cfg.httpTrace(http.MethodPost, "/voucher-order/seckill/{voucher_id}",
		cfg.httpValidate(cfg.httpLock(http.HandlerFunc(cfg.httpOrder)))))
	return httpFraming(mux), nil
}

// NewHTTPServer returns the http.Server of `seckill serve -http nethttp`:
// NewHTTPHandler(cfg) with cfg.Timeouts as the server's ReadHeaderTimeout,
// ReadTimeout, WriteTimeout and IdleTimeout (before, only the header was
// bounded, at 5s), and request headers bounded to MaxHeaderBytes. A client
// past the header or request timeout is disconnected. Call Serve with a
// listener. Errors: as NewFiberApp.
func NewHTTPServer(cfg Config) (*http.Server, error) {
	return newNetHTTPServer(cfg, NewHTTPHandler)
}

// newNetHTTPServer is NewHTTPServer for any of the net/http stacks: the
// handler that handler builds, served with cfg.Timeouts.
func newNetHTTPServer(cfg Config, handler func(Config) (http.Handler, error)) (*http.Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h, err := handler(cfg)
	if err != nil {
		return nil, err
	}
	return netHTTPServer(cfg.Timeouts, h), nil
}

// netHTTPServer serves h with the timeouts to (defaults filled).
func netHTTPServer(to Timeouts, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: to.ReadHeader,
		// ReadTimeout covers the header and the body.
		ReadTimeout: to.Read,
		// WriteTimeout runs from the end of the request header to the end
		// of the answer: the body, the lock wait, the handler and the
		// write (Timeouts checks that it is longer than the wait).
		WriteTimeout: to.Write,
		IdleTimeout:  to.Idle,
		// The request line and headers: 8 KiB (net/http's default is
		// 1 MiB; Fiber's buffer bounds them to 4 KiB). Larger is 431.
		MaxHeaderBytes: MaxHeaderBytes,
	}
}

// MaxHeaderBytes is the http.Server.MaxHeaderBytes of NewHTTPServer.
const MaxHeaderBytes = 8 << 10

// httpFraming refuses, with 400 and Connection: close, a request with a
// Transfer-Encoding. net/http (Go 1.26) itself answers 400 to several
// differing Content-Length headers (and merges identical ones) and 501 to
// a Transfer-Encoding other than "chunked", closing the connection; but it
// reads "Transfer-Encoding: chunked" with a Content-Length as chunked,
// drops the Content-Length, and keeps the connection open, so the bytes
// after the chunked body are served as the next request — what a proxy in
// front that trusted the Content-Length would see as one request. The
// handler cannot tell that request from a plain chunked one (the header
// is gone), and the service takes no chunked body: every chunked request
// is refused, and closing the connection drops what follows it.
func httpFraming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusBadRequest, errorReply{MsgBadFraming})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// httpValidate enforces the body limit (413) and checks the ids (400) and
// the voucher (404) before next; nothing is locked or written when it
// answers. chi routes use it too (r.PathValue is chi's parameter).
func (cfg Config) httpValidate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := cfg.readBody(w, r); code != 0 {
			writeJSON(w, code, errorReply{msg})
			return
		}
		id, code, msg := cfg.checkOrder(r.Context(), r.PathValue("voucher_id"), r.URL.Query().Get("user_id"))
		if code != 0 {
			writeJSON(w, code, errorReply{msg})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), idsKey{}, id)))
	})
}

// readBody reads and drops the request body within cfg.BodyLimit (the
// order takes none): 413 past it, 400 when it cannot be read, 0 when it
// is fine. Every net/http stack's order route calls it first.
func (cfg Config) readBody(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.ContentLength > int64(cfg.BodyLimit) {
		return http.StatusRequestEntityTooLarge, MsgBodyTooLarge
	}
	if r.Body == nil {
		return 0, ""
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, int64(cfg.BodyLimit)))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, MsgBodyTooLarge
	}
	if err != nil {
		return http.StatusBadRequest, "unreadable request body"
	}
	return 0, ""
}

// httpVoucher is GET /vouchers/{voucher_id} on net/http and chi.
func (cfg Config) httpVoucher(w http.ResponseWriter, r *http.Request) {
	id, err := parseID("voucher_id", r.PathValue("voucher_id"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{err.Error()})
		return
	}
	v, err := cfg.Service.Store.Voucher(r.Context(), id)
	if err != nil {
		code, msg := cfg.outcome(r.Context(), err)
		writeJSON(w, code, errorReply{msg})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func healthz(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

// httpLock is the lock step of cfg.Mode on net/http and chi.
func (cfg Config) httpLock(next http.Handler) http.Handler {
	switch cfg.Mode {
	case LockRedis:
		return cfg.httpRedisLock(next)
	case LockLocal:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			unlock, ok := cfg.lockLocal(r.Context(), r.Context().Value(idsKey{}).(ids))
			if !ok {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusTooManyRequests, errorReply{MsgBusy})
				return
			}
			defer unlock()
			next.ServeHTTP(w, r)
		})
	}
	return next
}

// httpOrder is the order handler of the net/http stacks (gin and echo
// call it with their writer and request): it runs with the lease's
// context as r.Context() when a Redis lock guards it.
func (cfg Config) httpOrder(w http.ResponseWriter, r *http.Request) {
	id := r.Context().Value(idsKey{}).(ids)
	orderID, err := cfg.Service.Order(r.Context(), id.user, id.voucher)
	if err != nil {
		code, msg := cfg.outcome(r.Context(), err)
		if ra := orderRetryAfter(err); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		writeJSON(w, code, errorReply{msg})
		return
	}
	writeJSON(w, http.StatusOK, orderReply{OrderID: orderID})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
