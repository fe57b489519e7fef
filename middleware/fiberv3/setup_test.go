package fiberlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad Config — no Locker, no or a malformed key, an
// invalid Wait, TTL, ReleaseTimeout, MaxBodySize or LockOptions entry —
// makes New panic at setup with FailOpen on (so it can neither answer 503
// to every request nor run them all without the lock), with an error
// value that Validate returns too. The control: the same route with good
// values of every field serves 200 under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	cases := []struct {
		name  string
		cfg   fiberlock.Config // Locker l unless noLocker; FailOpen always on
		noL   bool
		want  error
		names string
	}{
		{name: "no Locker", noL: true, cfg: fiberlock.Config{Key: key}, want: core.ErrInvalid, names: "Config.Locker"},
		{name: "no Key", cfg: fiberlock.Config{}, want: keyfunc.ErrBadTemplate, names: "Config.Key"},
		{name: "unbalanced brace", cfg: fiberlock.Config{Key: "order:{query.id"}, want: keyfunc.ErrBadTemplate},
		{name: "gRPC source", cfg: fiberlock.Config{Key: "order:{field.id}"}, want: keyfunc.ErrBadTemplate},
		{name: "unknown source", cfg: fiberlock.Config{Key: "o:{usr.id}"}, want: keyfunc.ErrBadTemplate},
		{name: "empty placeholder", cfg: fiberlock.Config{Key: "a:{}"}, want: keyfunc.ErrBadTemplate},
		{name: "unknown type", cfg: fiberlock.Config{Key: "o:{query.id:float}"}, want: keyfunc.ErrBadTemplate},
		{name: "gRPC template", cfg: fiberlock.Config{Template: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.MD("x"))}, want: keyfunc.ErrBadTemplate},
		{name: "TTL below minimum", cfg: fiberlock.Config{Key: key, TTL: 10 * time.Millisecond}, want: core.ErrInvalid, names: "Config.TTL"},
		{name: "TTL just below minimum", cfg: fiberlock.Config{Key: key, TTL: core.MinTTL - 1}, want: core.ErrInvalid, names: "Config.TTL"},
		{name: "negative TTL", cfg: fiberlock.Config{Key: key, TTL: -time.Second}, want: core.ErrInvalid, names: "Config.TTL"},
		{name: "negative wait", cfg: fiberlock.Config{Key: key, Wait: -2 * time.Second}, want: core.ErrInvalid, names: "Config.Wait"},
		{name: "wait -2ns", cfg: fiberlock.Config{Key: key, Wait: core.NoWait - 1}, want: core.ErrInvalid, names: "Config.Wait"},
		{name: "negative release timeout", cfg: fiberlock.Config{Key: key, ReleaseTimeout: -time.Millisecond}, want: core.ErrInvalid, names: "Config.ReleaseTimeout"},
		{name: "negative body size", cfg: fiberlock.Config{Key: "o:{body.id}", MaxBodySize: -1}, want: core.ErrInvalid, names: "Config.MaxBodySize"},
		{name: "nil lock option", cfg: fiberlock.Config{Key: key, LockOptions: []core.LockOption{core.WithoutWatchdog(), nil}}, want: core.ErrInvalid, names: "Config.LockOptions"},
		{name: "core TTL below minimum", cfg: fiberlock.Config{Key: key, LockOptions: []core.LockOption{core.WithTTL(time.Millisecond)}}, want: core.ErrInvalid, names: "Config.LockOptions"},
		{name: "core negative wait", cfg: fiberlock.Config{Key: key, LockOptions: []core.LockOption{core.WithWait(-5 * time.Second)}}, want: core.ErrInvalid, names: "Config.LockOptions"},
		{name: "core zero release timeout", cfg: fiberlock.Config{Key: key, LockOptions: []core.LockOption{core.WithReleaseTimeout(0)}}, want: core.ErrInvalid, names: "Config.LockOptions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.FailOpen = true
			if !c.noL {
				cfg.Locker = l
			}
			err := fiberlock.Validate(cfg)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("Validate: %v, want an error matching %v naming %q", err, c.want, c.names)
			}
			v := locktest.Panics(func() { fiberlock.New(cfg) })
			if pe, ok := v.(error); !ok || pe.Error() != err.Error() {
				t.Fatalf("New panicked with %v, want %v", v, err)
			}
		})
	}
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
		f.Post("/seckill/:voucher", fiberlock.New(cfg), func(c fiber.Ctx) error {
			lease := fiberlock.FromContext(c)
			n, err := rc.Exists(c.Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
			return nil
		})
		// Zero values mean the defaults.
		f.Post("/zero/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: key}), func(c fiber.Ctx) error {
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
