package echolock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/echo"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad field of Config is an error of NewWithConfig
// that names the field, with FailOpen on, so that it can neither answer 503
// to every request nor run them all without the lock; no middleware comes
// with it, and Must panics with it (httpsuite.SetupErrors, plus Echo's
// own: ErrNoLocker, a Template winning over a good Key). The control: good
// values of every field serve 200 under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	config := func(s httpsuite.Settings) echolock.Config {
		return echolock.Config{Locker: s.Locker, Key: s.Key, Template: s.Template, FailOpen: true,
			Wait: s.Wait, TTL: s.TTL, ReleaseTimeout: s.ReleaseTimeout,
			MaxBodySize: s.MaxBodySize, LockOptions: s.LockOptions, Limit: s.Limit, Shared: s.Shared}
	}
	httpsuite.SetupErrors(t, l, httpsuite.Setup{
		New: func(s httpsuite.Settings) (bool, error) {
			mw, err := echolock.NewWithConfig(config(s))
			return mw != nil, err
		},
		Must: func(s httpsuite.Settings) { echolock.Must(echolock.NewWithConfig(config(s))) },
		Name: httpsuite.ConfigName,
	})
	if _, err := echolock.NewWithConfig(echolock.Config{Key: key}); !errors.Is(err, echolock.ErrNoLocker) {
		t.Errorf("nil Locker: %v, want ErrNoLocker", err)
	}
	grpcTmpl := keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.MD("x"))
	if _, err := echolock.NewWithConfig(echolock.Config{Locker: l, Key: key, Template: grpcTmpl}); !errors.Is(err, keyfunc.ErrBadTemplate) || !strings.Contains(err.Error(), "Config.Template") {
		t.Errorf("a gRPC Template with a good Key: %v, want the Template named", err)
	}
	t.Run("New", func(t *testing.T) {
		if mw, err := echolock.New(nil, key); !errors.Is(err, echolock.ErrNoLocker) || mw != nil {
			t.Fatalf("New(nil): %v", err)
		}
		var ke *keyfunc.Error
		if mw, err := echolock.New(l, "o:{query.id"); !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrBadTemplate) || mw != nil {
			t.Fatalf("New(bad key): %v, want a *keyfunc.Error", err)
		}
	})

	t.Run("control: good values serve 200 under the lock", func(t *testing.T) {
		type seen struct {
			key  string
			held bool
		}
		got := make(chan seen, 1)
		rc := srv.Client(t)
		mw, err := echolock.NewWithConfig(echolock.Config{
			Locker:         l,
			Key:            "order:{query.user_id:int}:{path.voucher}",
			FailOpen:       true,
			TTL:            core.MinTTL,
			Wait:           core.NoWait,
			ReleaseTimeout: time.Second,
			MaxBodySize:    1,
			LockOptions:    []core.LockOption{core.WithReleaseTimeout(time.Second), core.WithWatchdog()},
			// nil keeps each default: Skipper, Logger, BusyHandler,
			// ErrorHandler, ContextValue
		})
		if err != nil {
			t.Fatal(err)
		}
		e := newEcho()
		e.POST("/seckill/:voucher", func(c echo.Context) error {
			lease := echolock.FromContext(c.Request().Context())
			n, err := rc.Exists(c.Request().Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
			return c.NoContent(http.StatusOK)
		}, mw)
		s := start(t, e)
		r := s.do(locktest.Context(t), "POST", "/seckill/7?user_id=042", "", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
	})
}
