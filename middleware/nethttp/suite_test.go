package httplock_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/middleware/nethttp"
)

// TestSuite runs the HTTP behaviour suite on net/http's ServeMux, behind
// net/http's own panic handling (it logs the panic and drops the
// connection).
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{Name: "nethttp", Serve: serveRoutes}

// serveRoutes serves routes on one http.ServeMux ({name} is its own path
// syntax), each behind httplock configured from the route.
func serveRoutes(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	mux := http.NewServeMux()
	for _, rt := range routes {
		h := handler(rt.Handler)
		if !rt.Bare {
			mw, err := httplock.New(rt.Locker, rt.Key, options(rt.Options)...)
			if err != nil {
				t.Fatalf("httplock.New(%q): %v", rt.Key, err)
			}
			h = mw(h)
		}
		if rt.Context != nil {
			h = withContext(rt.Context, h)
		}
		mux.Handle(rt.Method+" "+rt.Path, h)
	}
	ts, _ := serve(t, mux)
	return ts.URL
}

// options maps the suite's settings to httplock's; zero values set nothing.
func options(o httpsuite.Options) []httplock.Option {
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

// handler runs h as a net/http handler: r.Context(), the lease, the body
// read in full (and replayed for the form).
func handler(h httpsuite.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		status, text := h(r.Context(), httplock.FromContext(r.Context()), httpsuite.Request{Body: body, Form: r.PostFormValue})
		w.WriteHeader(status)
		io.WriteString(w, text)
	})
}

// withContext is an earlier middleware that sets the request's context.
func withContext(f func(parent context.Context) context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(f(r.Context())))
	})
}
