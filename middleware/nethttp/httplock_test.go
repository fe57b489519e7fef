package httplock_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// The behaviour every HTTP adapter shares (bad input, busy, Redis down,
// lost locks, one at a time, ...) is checked by the suite (suite_test.go);
// the tests here are net/http's own.

// TestPathValueOption: a pluggable path lookup for other routers.
func TestPathValueOption(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	keys := make(chan string, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { keys <- httplock.FromContext(r.Context()).Key() })
	chiLike := func(r *http.Request, name string) string {
		if name == "voucher" {
			return strings.TrimPrefix(r.URL.Path, "/v/")
		}
		return ""
	}
	ts, _ := serve(t, httplock.Must(httplock.New(l, "v:{path.voucher}", httplock.WithPathValue(chiLike)))(h))
	if r := locktest.Do(locktest.Context(t), ts.Client(), "GET", ts.URL+"/v/abc", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v", r.Status, r.Err)
	}
	if k := <-keys; k != "v:abc" {
		t.Fatalf("key %q", k)
	}
}

// TestPanicGoesOnToTheServer: the middleware does not swallow a handler's
// panic: after releasing the lock it goes on to net/http, which logs it
// and drops the connection (the suite accepts a 500 too, for frameworks
// that recover).
func TestPanicGoesOnToTheServer(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic("boom in handler")
		}
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}", httplock.WithWait(core.NoWait)))(h))
	ts, errLog := serve(t, mux)
	ctx := locktest.Context(t)
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7?user_id=1", "", ""); r.Err == nil {
		t.Fatalf("panicking request answered %d, want the connection dropped", r.Status)
	}
	if !strings.Contains(errLog.String(), "boom in handler") {
		t.Fatalf("server log %q does not show the panic", errLog.String())
	}
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7?user_id=1", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("next request: %d %v %s, want 200 at once", r.Status, r.Err, r.Body)
	}
}
