package httplock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad Locker, template and option is an error of New
// (and NewTemplate) naming what is wrong, with fail-open on — before and
// after the bad option — so that it can neither answer 503 to every
// request nor run them all without the lock; Must panics with it
// (httpsuite.OptionsSetupErrors). The control: the same route with good
// values of every option serves 200 under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	httpsuite.OptionsSetupErrors(t, l, httpsuite.OptionSetup[func(http.Handler) http.Handler, httplock.Option]{
		New: httplock.New, NewTemplate: httplock.NewTemplate, Must: httplock.Must,
		Wait: httplock.WithWait, TTL: httplock.WithTTL, ReleaseTimeout: httplock.WithReleaseTimeout,
		MaxBodySize: httplock.WithMaxBodySize, LockOptions: httplock.WithLockOptions, FailOpen: httplock.WithFailOpen,
		Limit: httplock.WithLimit, Shared: httplock.WithShared,
	})

	t.Run("control: good values serve 200 under the lock", func(t *testing.T) {
		type seen struct {
			key  string
			held bool
		}
		got := make(chan seen, 1)
		rc := srv.Client(t)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			lease := httplock.FromContext(r.Context())
			n, err := rc.Exists(r.Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
		})
		mw, err := httplock.New(l, "order:{query.user_id:int}:{path.voucher}",
			httplock.WithFailOpen(),
			httplock.WithTTL(core.MinTTL), httplock.WithTTL(0), // 0 sets nothing
			httplock.WithWait(core.NoWait), httplock.WithWait(0),
			httplock.WithReleaseTimeout(time.Second), httplock.WithReleaseTimeout(0),
			httplock.WithMaxBodySize(0), httplock.WithMaxBodySize(1),
			httplock.WithLockOptions(core.WithReleaseTimeout(time.Second), core.WithWatchdog()),
			httplock.WithLockOptions(),
			// nil keeps each default
			httplock.WithBusyHandler(nil), httplock.WithErrorHandler(nil), httplock.WithLogger(nil),
			httplock.WithPathValue(nil), httplock.WithContextValue(nil))
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /seckill/{voucher}", mw(h))
		ts, _ := serve(t, mux)
		r := locktest.Do(locktest.Context(t), ts.Client(), "POST", ts.URL+"/seckill/7?user_id=042", "", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
	})
}

// TestLockerOnlyOptionDoesNotCompile: a Locker-only core option
// (core.WithPrefix) cannot be given as a per-route lock option: it is a
// compile error, not a setup or request-time one. The control, a per-call
// option in the same place, compiles.
func TestLockerOnlyOptionDoesNotCompile(t *testing.T) {
	if out, err := locktest.Build(t, "testdata/lockeronly_good.go"); err != nil {
		t.Fatalf("control does not compile: %v\n%s", err, out)
	}
	out, err := locktest.Build(t, "testdata/lockeronly_bad.go")
	if err == nil {
		t.Fatal("a Locker-only option compiled as a lock option")
	}
	if !strings.Contains(out, "core.LockOption") {
		t.Fatalf("compile error does not name core.LockOption:\n%s", out)
	}
}

// TestWithRouteChecksPathPlaceholders: with WithRoute, a placeholder the
// route cannot fill is a setup error naming template and route; the
// control with the right name builds.
func TestWithRouteChecksPathPlaceholders(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	_, err := httplock.New(l, "order:{path.vouchr:int}", httplock.WithRoute("POST /v/{voucher}"))
	if !errors.Is(err, keyfunc.ErrBadTemplate) || !strings.Contains(err.Error(), "WithRoute") || !strings.Contains(err.Error(), "/v/{voucher}") {
		t.Fatalf("New: %v, want ErrBadTemplate naming WithRoute and the route", err)
	}
	if _, err := httplock.New(l, "order:{path.voucher:int}", httplock.WithRoute("POST /v/{voucher}")); err != nil {
		t.Fatalf("control: %v", err)
	}
}
