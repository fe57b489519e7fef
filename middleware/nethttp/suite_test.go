package httplock_test

import (
	"net/http"
	"testing"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/httpsuite/nethttpstack"
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
		var h http.Handler = nethttpstack.Handler(rt.Handler)
		if !rt.Bare {
			mw, err := httplock.New(rt.Locker, rt.Key, nethttpstack.Options(rt.Options)...)
			if err != nil {
				t.Fatalf("httplock.New(%q): %v", rt.Key, err)
			}
			h = mw(h)
		}
		if rt.Context != nil {
			h = nethttpstack.WithContext(rt.Context)(h)
		}
		mux.Handle(rt.Method+" "+rt.Path, h)
	}
	ts, _ := serve(t, mux)
	return ts.URL
}
