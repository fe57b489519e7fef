package lockfx_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/lockfx"
	"github.com/lockgate/lockgate/redistest"
)

// universal supplies c as the graph's redis.UniversalClient, as an
// application that built its own client would.
func universal(c redis.UniversalClient) fx.Option {
	return fx.Supply(fx.Annotate(c, fx.As(new(redis.UniversalClient))))
}

// TestModuleLifecycle: start, lock through the provided Locker with the
// Config and group options applied, stop: the Locker is closed, the client
// is not.
func TestModuleLifecycle(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)

	var l *core.Locker
	app := fxtest.New(t,
		universal(client),
		fx.Supply(&lockfx.Config{Prefix: "lockfx-test:", TTL: 5 * time.Second}),
		lockfx.Options(core.WithWait(0)),
		lockfx.Module,
		fx.Populate(&l),
	)
	app.RequireStart()

	ctx := context.Background()
	lease, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// Config.Prefix applied: the lock lives under the configured prefix.
	if n, err := client.Exists(ctx, "lockfx-test:{a}").Result(); err != nil || n != 1 {
		t.Fatalf("lock hash under the configured prefix: exists=%d err=%v", n, err)
	}
	// Config.TTL applied.
	if ttl, err := client.PTTL(ctx, "lockfx-test:{a}").Result(); err != nil || ttl > 5*time.Second || ttl <= 0 {
		t.Fatalf("PTTL = %v, %v; want (0, 5s]", ttl, err)
	}
	// core.WithWait(0) from the group applied: a second owner fails at once
	// with a busy error rather than waiting the default 2s.
	start := time.Now()
	if _, err := l.Lock(ctx, "a"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("second Lock: %v, want ErrNotObtained", err)
	}
	if d := time.Since(start); d >= core.DefaultWait {
		t.Fatalf("second Lock waited %v: group option WithWait(0) not applied", d)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	app.RequireStop()

	if _, err := l.Lock(ctx, "b"); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Lock after stop: %v, want ErrClosed", err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("client closed by the module (Ping: %v); it must stay open", err)
	}
}

// TestModuleWithoutConfig: no *Config in the graph keeps core defaults.
func TestModuleWithoutConfig(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var l *core.Locker
	app := fxtest.New(t, universal(client), lockfx.Module, fx.Populate(&l))
	app.RequireStart()
	defer app.RequireStop()

	ctx := context.Background()
	lease, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer lease.Unlock(ctx)
	if n, _ := client.Exists(ctx, core.DefaultPrefix+"{k}").Result(); n != 1 {
		t.Fatalf("lock not under the default prefix %q", core.DefaultPrefix)
	}
}

// TestConfigErrors: a Config field out of range fails the application at
// construction with an error naming the field.
func TestConfigErrors(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	for _, tc := range []struct {
		name  string
		cfg   lockfx.Config
		field string
	}{
		{"short ttl", lockfx.Config{TTL: time.Millisecond}, "Config.TTL"},
		{"negative wait", lockfx.Config{Wait: -time.Second}, "Config.Wait"},
		{"brace prefix", lockfx.Config{Prefix: "a{b"}, "Config.Prefix"},
		{"long prefix", lockfx.Config{Prefix: strings.Repeat("p", core.MaxPrefixLen+1)}, "Config.Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			app := fx.New(fx.NopLogger, universal(client), fx.Supply(&cfg), lockfx.Module,
				fx.Invoke(func(*core.Locker) {}))
			err := app.Err()
			if err == nil || !strings.Contains(err.Error(), tc.field) || !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("app.Err() = %v; want an ErrInvalid error naming %s", err, tc.field)
			}
		})
	}
}
