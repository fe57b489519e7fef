package echolock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/echo"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad field of Config is an error of NewWithConfig
// that names the field, with FailOpen on, so that it can neither answer 503
// to every request nor run them all without the lock; no middleware comes
// with it, and Must panics with it. The control: good values of every field
// serve 200 under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	cases := []struct {
		name  string
		cfg   echolock.Config
		want  error
		names string // the error text must contain it
	}{
		{"nil Locker", echolock.Config{Key: key}, echolock.ErrNoLocker, "Config.Locker"},
		{"nil Locker, Template", echolock.Config{Template: keyfunc.MustCompile(key)}, core.ErrInvalid, "Config.Locker"},
		{"no Key nor Template", echolock.Config{Locker: l}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"unbalanced brace", echolock.Config{Locker: l, Key: "order:{query.id"}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"gRPC source", echolock.Config{Locker: l, Key: "order:{field.id}"}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"gRPC metadata", echolock.Config{Locker: l, Key: "order:{md.x}"}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"unknown source", echolock.Config{Locker: l, Key: "o:{usr.id}"}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"unknown type", echolock.Config{Locker: l, Key: "o:{query.id:float}"}, keyfunc.ErrBadTemplate, "Config.Key"},
		{"gRPC template", echolock.Config{Locker: l, Template: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.Field("id"))}, keyfunc.ErrBadTemplate, "Config.Template"},
		{"gRPC template wins over a good Key", echolock.Config{Locker: l, Key: key, Template: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.MD("x"))}, keyfunc.ErrBadTemplate, "Config.Template"},
		{"TTL below minimum", echolock.Config{Locker: l, Key: key, TTL: 10 * time.Millisecond}, core.ErrInvalid, "Config.TTL"},
		{"TTL just below minimum", echolock.Config{Locker: l, Key: key, TTL: core.MinTTL - 1}, core.ErrInvalid, "Config.TTL"},
		{"negative TTL", echolock.Config{Locker: l, Key: key, TTL: -time.Second}, core.ErrInvalid, "Config.TTL"},
		{"negative Wait", echolock.Config{Locker: l, Key: key, Wait: -2 * time.Second}, core.ErrInvalid, "Config.Wait"},
		{"Wait -2ns", echolock.Config{Locker: l, Key: key, Wait: core.NoWait - 1}, core.ErrInvalid, "Config.Wait"},
		{"negative ReleaseTimeout", echolock.Config{Locker: l, Key: key, ReleaseTimeout: -time.Millisecond}, core.ErrInvalid, "Config.ReleaseTimeout"},
		{"negative MaxBodySize", echolock.Config{Locker: l, Key: "o:{body.id}", MaxBodySize: -1}, core.ErrInvalid, "Config.MaxBodySize"},
		{"nil lock option", echolock.Config{Locker: l, Key: key, LockOptions: []core.LockOption{core.WithoutWatchdog(), nil}}, core.ErrInvalid, "Config.LockOptions"},
		{"core TTL below minimum", echolock.Config{Locker: l, Key: key, LockOptions: []core.LockOption{core.WithTTL(time.Millisecond)}}, core.ErrInvalid, "Config.LockOptions"},
		{"core negative wait", echolock.Config{Locker: l, Key: key, LockOptions: []core.LockOption{core.WithWait(-5 * time.Second)}}, core.ErrInvalid, "Config.LockOptions"},
		{"core zero release timeout", echolock.Config{Locker: l, Key: key, LockOptions: []core.LockOption{core.WithReleaseTimeout(0)}}, core.ErrInvalid, "Config.LockOptions"},
		{"bad field after good ones", echolock.Config{Locker: l, Key: key, Wait: time.Second, ReleaseTimeout: time.Second, TTL: time.Nanosecond}, core.ErrInvalid, "Config.TTL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.FailOpen = true
			mw, err := echolock.NewWithConfig(cfg)
			if !errors.Is(err, c.want) || mw != nil {
				t.Fatalf("error %v (middleware %v), want one matching %v and no middleware", err, mw != nil, c.want)
			}
			if !strings.Contains(err.Error(), c.names) {
				t.Fatalf("error %q does not name %q", err, c.names)
			}
			if v, _ := locktest.Panics(func() { echolock.Must(echolock.NewWithConfig(cfg)) }).(error); !errors.Is(v, c.want) {
				t.Fatalf("Must panicked with %v, want %v", v, err)
			}
		})
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
