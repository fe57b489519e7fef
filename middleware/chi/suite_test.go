package chilock_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/httpsuite/nethttpstack"
	"github.com/lockgate/lockgate/middleware/nethttp"
)

// TestSuite runs the HTTP behaviour suite on chi with httplock, as the
// package doc says: r.With(lock).Method(method, path, h), behind chi's
// Recoverer (a panic answers 500).
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{
	Name:  "chi",
	Serve: serveRoutes,
	// chi matches /seckill/%37 on its raw path and hands on "%37"; see the
	// package doc and TestDecodedPathValues.
	RawPathParams: true,
}

// serveRoutes serves routes on one chi router, each route's middleware
// inline with r.With (so that chi has matched the route and set its
// parameters before httplock builds the key).
func serveRoutes(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	r := chi.NewRouter()
	r.Use(middleware.RequestLogger(quietLog{}), middleware.Recoverer)
	for _, rt := range routes {
		var mws []func(http.Handler) http.Handler
		if rt.Context != nil {
			mws = append(mws, nethttpstack.WithContext(rt.Context))
		}
		if !rt.Bare {
			lock, err := httplock.New(rt.Locker, rt.Key, nethttpstack.Options(rt.Options)...)
			if err != nil {
				t.Fatalf("httplock.New(%q): %v", rt.Key, err)
			}
			mws = append(mws, lock)
		}
		r.With(mws...).Method(rt.Method, rt.Path, nethttpstack.Handler(rt.Handler))
	}
	return serve(t, r).URL
}

// quietLog is a chi request logger that logs nothing, so that Recoverer
// logs a panic through it rather than printing the stack to stderr.
type quietLog struct{}

func (quietLog) NewLogEntry(*http.Request) middleware.LogEntry   { return quietLog{} }
func (quietLog) Write(int, int, http.Header, time.Duration, any) {}
func (quietLog) Panic(any, []byte)                               {}

// serve starts an httptest.Server for h, its error log discarded, closed
// at cleanup.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}
