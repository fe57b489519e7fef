package chilock_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// keyHandler answers the lease's key, counting its runs.
func keyHandler(ran *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		io.WriteString(w, httplock.FromContext(r.Context()).Key())
	}
}

// TestUseBeforeTheRoute checks the package doc's warning: the lock given
// to Use in a group runs before the group's router has matched
// "/{voucher}", so every request is answered 400 path.voucher missing and
// the handler never runs — with WithPathValue(chi.URLParam) too, and at
// the root. The controls, the forms the doc recommends: With in the group
// and at the root, and Use in a group whose own pattern holds the
// parameter, each serve 200 under order:1:7.
func TestUseBeforeTheRoute(t *testing.T) {
	srv := redistest.Start(t)
	l := locktest.Locker(t, srv.Client(t))
	const key = "order:{query.user_id}:{path.voucher}"
	lock := httplock.Must(httplock.New(l, key))
	lockURLParam := httplock.Must(httplock.New(l, key, httplock.WithPathValue(chi.URLParam)))
	var ran atomic.Int32
	h := keyHandler(&ran)

	r := chi.NewRouter()
	r.Route("/use", func(g chi.Router) {
		g.Use(lock)
		g.Post("/{voucher}", h)
	})
	r.Route("/use-urlparam", func(g chi.Router) {
		g.Use(lockURLParam)
		g.Post("/{voucher}", h)
	})
	root := chi.NewRouter()
	root.Use(lock)
	root.Post("/root/{voucher}", h)
	r.Mount("/r", root)
	r.Route("/with", func(g chi.Router) {
		g.With(lock).Post("/{voucher}", h)
	})
	r.With(lock).Post("/seckill/{voucher}", h)
	r.Route("/mounted/{voucher}", func(g chi.Router) {
		g.Use(lock)
		g.Post("/", h)
	})
	ts := serve(t, r)
	ctx := locktest.Context(t)

	for _, p := range []string{"/use/7?user_id=1", "/use-urlparam/7?user_id=1", "/r/root/7?user_id=1"} {
		res := locktest.Do(ctx, ts.Client(), "POST", ts.URL+p, "", "")
		// Run before chi matched "{voucher}": no request can fill it, the
		// server's mistake (500, logged naming the route), not the client's.
		if res.Err != nil || res.Status != http.StatusInternalServerError {
			t.Fatalf("%s: %d %v %s, want 500", p, res.Status, res.Err, res.Body)
		}
		if msg := locktest.ErrorText(t, res.Body); msg != "internal server error" {
			t.Fatalf("%s: text %q", p, msg)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times behind Use", n)
	}
	if n, err := srv.Client(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("redis holds %d keys (%v), want 0", n, err)
	}
	for _, p := range []string{"/with/7?user_id=1", "/seckill/7?user_id=1", "/mounted/7/?user_id=1"} {
		if res := locktest.Do(ctx, ts.Client(), "POST", ts.URL+p, "", ""); res.Err != nil || res.Status != 200 || res.Body != "order:1:7" {
			t.Errorf("control %s: %d %v %q, want 200 under order:1:7", p, res.Status, res.Err, res.Body)
		}
	}
}

// TestDecodedPathValues checks the package doc's percent-encoding note:
// with the lock inline, /seckill/%37 locks the raw "%37" chi hands on (its
// own lock, order:%2537, free while voucher 7 is held); with the doc's
// decoding WithPathValue it locks voucher 7, busy while /seckill/7 is held.
func TestDecodedPathValues(t *testing.T) {
	srv := redistest.Start(t)
	l := locktest.Locker(t, srv.Client(t))
	decoded := httplock.WithPathValue(func(r *http.Request, name string) string {
		v, err := url.PathUnescape(chi.URLParam(r, name))
		if err != nil {
			return ""
		}
		return v
	})
	const key = "order:{path.voucher}"
	nowait := httplock.WithWait(core.NoWait)
	plain := httplock.Must(httplock.New(l, key, nowait))
	dec := httplock.Must(httplock.New(l, key, nowait, decoded))
	var ran atomic.Int32
	h := keyHandler(&ran)
	r := chi.NewRouter()
	r.With(plain).Post("/plain/{voucher}", h)
	r.With(dec).Post("/decoded/{voucher}", h)
	ts := serve(t, r)
	ctx := locktest.Context(t)

	held, err := l.Lock(ctx, "order:7")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	if res := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/plain/%37", "", ""); res.Err != nil || res.Status != 200 || res.Body != "order:%2537" {
		t.Fatalf("plain /plain/%%37: %d %v %q, want 200 under order:%%2537 (chi's raw value)", res.Status, res.Err, res.Body)
	}
	for _, p := range []string{"/decoded/%37", "/decoded/7", "/plain/7"} {
		if res := locktest.Do(ctx, ts.Client(), "POST", ts.URL+p, "", ""); res.Err != nil || res.Status != http.StatusTooManyRequests {
			t.Errorf("%s while order:7 is held: %d %v %s, want 429", p, res.Status, res.Err, res.Body)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if res := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/decoded/%37", "", ""); res.Err != nil || res.Status != 200 || res.Body != "order:7" {
		t.Fatalf("decoded /decoded/%%37: %d %v %q, want 200 under order:7", res.Status, res.Err, res.Body)
	}
}
