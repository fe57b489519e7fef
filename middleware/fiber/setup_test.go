package fiberlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad Config — no Locker, no or a malformed key, an
// invalid Wait, TTL, ReleaseTimeout, MaxBodySize or LockOptions entry —
// makes New panic at setup with FailOpen on (so it can neither answer 503
// to every request nor run them all without the lock), with an error
// value that Validate returns too (httpsuite.SetupErrors). The control:
// the same route with good values of every field serves 200 under the
// lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	config := func(s httpsuite.Settings) fiberlock.Config {
		return fiberlock.Config{Locker: s.Locker, Key: s.Key, Template: s.Template, FailOpen: true,
			Wait: s.Wait, TTL: s.TTL, ReleaseTimeout: s.ReleaseTimeout,
			MaxBodySize: int(s.MaxBodySize), LockOptions: s.LockOptions, Limit: s.Limit, Shared: s.Shared}
	}
	httpsuite.SetupErrors(t, l, httpsuite.Setup{
		New:  func(s httpsuite.Settings) (bool, error) { return false, fiberlock.Validate(config(s)) },
		Must: func(s httpsuite.Settings) { fiberlock.New(config(s)) },
		Name: httpsuite.ConfigName,
	})
	if v, _ := locktest.Panics(func() { fiberlock.New() }).(error); !errors.Is(v, core.ErrInvalid) {
		t.Errorf("New() without a config: panic %v, want a missing Locker", v)
	}

	t.Run("control: good values serve 200 under the lock", func(t *testing.T) {
		type seen struct {
			key  string
			held bool
		}
		got := make(chan seen, 1)
		rc := srv.Client(t)
		cfg := fiberlock.Config{
			Locker:         l,
			Key:            "order:{query.user_id:int}:{path.voucher}",
			FailOpen:       true,
			Wait:           core.NoWait,
			TTL:            core.MinTTL,
			ReleaseTimeout: time.Second,
			MaxBodySize:    1,
			LockOptions:    []core.LockOption{core.WithReleaseTimeout(time.Second), core.WithWatchdog()},
		}
		if err := fiberlock.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		f := newApp()
		f.Post("/seckill/:voucher", fiberlock.New(cfg), func(c *fiber.Ctx) error {
			lease := fiberlock.FromContext(c)
			n, err := rc.Exists(c.UserContext(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
			return nil
		})
		// Zero values mean the defaults.
		f.Post("/zero/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: key}), func(c *fiber.Ctx) error {
			return c.SendString(fiberlock.FromContext(c).Key())
		})
		a := start(t, f)
		ctx := locktest.Context(t)
		if r := a.do(ctx, "POST", "/seckill/7?user_id=042", "", ""); r.Err != nil || r.Status != 200 {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
		if r := a.do(ctx, "POST", "/zero/7?user_id=1", "", ""); r.Err != nil || r.Status != 200 || r.Body != "order:1:7" {
			t.Fatalf("zero config: %d %v %q", r.Status, r.Err, r.Body)
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
