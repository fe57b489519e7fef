// Package nethttpstack is what the suite stacks built on httplock share
// (net/http's own and chi's): the suite's settings as httplock options, a
// suite handler as a net/http handler, and an earlier middleware setting
// the request's context.
package nethttpstack

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/middleware/nethttp"
)

// Options maps the suite's settings to httplock's; zero values set nothing.
func Options(o httpsuite.Options) []httplock.Option {
	opts := []httplock.Option{
		httplock.WithWait(o.Wait),
		httplock.WithTTL(o.TTL),
		httplock.WithReleaseTimeout(o.ReleaseTimeout),
		httplock.WithMaxBodySize(o.MaxBodySize),
		httplock.WithLogger(o.Logger),
		httplock.WithLockOptions(o.LockOptions...),
	}
	if o.FailOpen {
		opts = append(opts, httplock.WithFailOpen())
	}
	if o.Limit != 0 {
		opts = append(opts, httplock.WithLimit(o.Limit))
	}
	if o.Shared {
		opts = append(opts, httplock.WithShared())
	}
	if o.CustomBusy {
		opts = append(opts, httplock.WithBusyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "custom busy")
		})))
	}
	if o.CustomError {
		opts = append(opts, httplock.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, status int, _ error) {
			w.WriteHeader(status)
			io.WriteString(w, "custom error")
		}))
	}
	return opts
}

// Handler runs h as a net/http handler: r.Context(), the lease, the body
// read in full (and replayed for the form).
func Handler(h httpsuite.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		status, text := h(r.Context(), httplock.FromContext(r.Context()), httpsuite.Request{Body: body, Form: r.PostFormValue})
		w.WriteHeader(status)
		io.WriteString(w, text)
	}
}

// WithContext is an earlier middleware that sets the request's context to
// f's, given the request's (httpsuite.Route.Context).
func WithContext(f func(parent context.Context) context.Context) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(f(r.Context())))
		})
	}
}
