package httplock_test

import (
	"net/http"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// The route's lock events name the key template, not the key.
func TestEventsNameTheTemplate(t *testing.T) {
	srv := redistest.Start(t)
	rec := &locktest.Patterns{}
	l := newLocker(t, srv, core.WithObserver(rec))
	h := httplock.Must(httplock.New(l, "order:{query.user:int}"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts, _ := serve(t, h)
	resp, err := http.Get(ts.URL + "/?user=42")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if msg := rec.Check("order:", "order:{query.user:int}"); msg != "" {
		t.Fatal(msg)
	}
}
