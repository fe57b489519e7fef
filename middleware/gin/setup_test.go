package ginlock_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/gin"
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
	httpsuite.OptionsSetupErrors(t, l, httpsuite.OptionSetup[gin.HandlerFunc, ginlock.Option]{
		New: ginlock.New, NewTemplate: ginlock.NewTemplate, Must: ginlock.Must,
		Wait: ginlock.WithWait, TTL: ginlock.WithTTL, ReleaseTimeout: ginlock.WithReleaseTimeout,
		MaxBodySize: ginlock.WithMaxBodySize, LockOptions: ginlock.WithLockOptions, FailOpen: ginlock.WithFailOpen,
		Limit: ginlock.WithLimit, Shared: ginlock.WithShared,
	})

	t.Run("control: good values serve 200 under the lock", func(t *testing.T) {
		type seen struct {
			key  string
			held bool
		}
		got := make(chan seen, 1)
		rc := srv.Client(t)
		h := ginlock.Must(ginlock.New(l, "order:{query.user_id:int}:{path.voucher}",
			ginlock.WithFailOpen(),
			ginlock.WithTTL(core.MinTTL), ginlock.WithTTL(0), // 0 sets nothing
			ginlock.WithWait(core.NoWait), ginlock.WithWait(0),
			ginlock.WithReleaseTimeout(time.Second), ginlock.WithReleaseTimeout(0),
			ginlock.WithMaxBodySize(0), ginlock.WithMaxBodySize(1),
			ginlock.WithLockOptions(core.WithReleaseTimeout(time.Second), core.WithWatchdog()),
			ginlock.WithLockOptions(),
			// nil keeps each default
			ginlock.WithBusyHandler(nil), ginlock.WithErrorHandler(nil), ginlock.WithLogger(nil),
			ginlock.WithSkip(nil), ginlock.WithContextValue(nil)))
		e := newEngine()
		e.POST("/seckill/:voucher", h, func(c *gin.Context) {
			lease := ginlock.FromGin(c)
			n, err := rc.Exists(c.Request.Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
		})
		s := serve(t, e)
		r := s.do(locktest.Context(t), "POST", "/seckill/7?user_id=042", "", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
	})
}

// TestLockerOnlyOptionDoesNotCompile: a Locker-only core option
// (core.WithPrefix) cannot be given to WithLockOptions: it is a compile
// error, not a setup or request-time one. The control, a per-call option
// in the same place, compiles.
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
