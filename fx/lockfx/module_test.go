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
		lockfx.Options(core.WithWait(core.NoWait)),
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
	// core.WithWait(core.NoWait) from the group applied: a second owner fails at once
	// with a busy error rather than waiting the default 2s.
	start := time.Now()
	if _, err := l.Lock(ctx, "a"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("second Lock: %v, want ErrNotObtained", err)
	}
	if d := time.Since(start); d >= core.DefaultWait {
		t.Fatalf("second Lock waited %v: group option WithWait(core.NoWait) not applied", d)
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

// TestConfigErrors: a bad Config field, a bad option given with Options
// or a nil client fails the application's start with core's error
// (core.ErrInvalid), naming the field.
func TestConfigErrors(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		cfg    *lockfx.Config
		opts   []core.Option
		want   []string
	}{
		{"short ttl", client, &lockfx.Config{TTL: time.Millisecond}, nil, []string{"Config.TTL", "ttl 1ms"}},
		{"negative ttl", client, &lockfx.Config{TTL: -time.Second}, nil, []string{"Config.TTL"}},
		{"negative wait", client, &lockfx.Config{Wait: -time.Second}, nil, []string{"Config.Wait", "core.NoWait"}},
		{"negative release timeout", client, &lockfx.Config{ReleaseTimeout: -time.Second}, nil, []string{"Config.ReleaseTimeout", "release timeout"}},
		{"brace prefix", client, &lockfx.Config{Prefix: "a{b"}, nil, []string{"Config.Prefix", "brace"}},
		{"long prefix", client, &lockfx.Config{Prefix: strings.Repeat("p", core.MaxPrefixLen+1)}, nil, []string{"Config.Prefix"}},
		{"bad field among good ones", client, &lockfx.Config{Prefix: "ok:", TTL: time.Second, Wait: -2 * time.Second}, nil, []string{"Config.Wait"}},
		{"option with a short ttl", client, nil, []core.Option{core.WithReleaseTimeout(time.Second), core.WithTTL(10 * time.Millisecond)}, []string{"lockfx.Options option 1", "ttl"}},
		{"locker option out of range", client, nil, []core.Option{core.WithDriftFactor(2)}, []string{"lockfx.Options option 0", "drift factor"}},
		{"nil option", client, &lockfx.Config{TTL: time.Second}, []core.Option{nil}, []string{"lockfx.Options option 0", "nil option"}},
		{"typed nil client", (*redis.Client)(nil), nil, nil, []string{"Client", "nil redis client"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []fx.Option{fx.NopLogger, universal(tc.client), lockfx.Module, fx.Invoke(func(*core.Locker) {})}
			if tc.cfg != nil {
				opts = append(opts, fx.Supply(tc.cfg))
			}
			if tc.opts != nil {
				opts = append(opts, lockfx.Options(tc.opts...))
			}
			app := fx.New(opts...)
			err := app.Err()
			if err == nil {
				t.Fatal("app built, want an error")
			}
			t.Logf("%v", err)
			if !errors.Is(err, core.ErrInvalid) {
				t.Errorf("error %v does not match core.ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if err := app.Start(context.Background()); err == nil {
				t.Fatal("app started, want an error")
			}
		})
	}
}

// TestConfigNoWait: Config.Wait core.NoWait makes every Lock a single
// attempt (0 would keep the 2s default).
func TestConfigNoWait(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var l *core.Locker
	app := fxtest.New(t, universal(client), fx.Supply(&lockfx.Config{Wait: core.NoWait}), lockfx.Module, fx.Populate(&l))
	app.RequireStart()
	defer app.RequireStop()
	ctx := context.Background()
	lease, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer lease.Unlock(ctx)
	start := time.Now()
	if _, err := l.Lock(ctx, "k"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("second Lock: %v, want ErrNotObtained", err)
	}
	if d := time.Since(start); d >= time.Second {
		t.Fatalf("second Lock took %v: Config.Wait core.NoWait should make one attempt", d)
	}
}

// holdInBackground takes the lock key with l on a goroutine that holds it
// until its lease's context ends, and returns once the lock is in Redis.
// The channel yields the cause of the lease context's end.
func holdInBackground(t *testing.T, l *core.Locker, key string) <-chan error {
	t.Helper()
	locked := make(chan error, 1)
	cause := make(chan error, 1)
	go func() {
		lease, err := l.Lock(context.Background(), key)
		locked <- err
		if err != nil {
			return
		}
		<-lease.Done()
		cause <- context.Cause(lease.Context())
		_ = lease.Unlock(context.Background()) // ErrClosed: nothing left to do
	}()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("background Lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("background Lock did not return within 10s")
	}
	return cause
}

// waitCause waits (bounded) for a background holder's lease to end.
func waitCause(t *testing.T, cause <-chan error) error {
	t.Helper()
	select {
	case err := <-cause:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the background holder's lease context did not end within 10s")
		return nil
	}
}

// TestStopReleasesHeldLocks: when the application stops, a lock still held
// by a background goroutine is released in Redis (its key is gone as soon
// as RequireStop returns, not after its 30s TTL) and the holder's lease
// context is cancelled with cause core.ErrClosed. Control: the same lease
// ended with Close instead (what the module's stop hook did before) leaves
// the key in Redis, so the check can fail.
func TestStopReleasesHeldLocks(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()

	t.Run("stop", func(t *testing.T) {
		var l *core.Locker
		app := fxtest.New(t, universal(client), fx.Supply(&lockfx.Config{Prefix: "stop:"}), lockfx.Module, fx.Populate(&l))
		app.RequireStart()
		cause := holdInBackground(t, l, "job")
		if n, err := client.Exists(ctx, "stop:{job}").Result(); err != nil || n != 1 {
			t.Fatalf("lock not in Redis while held: exists=%d err=%v", n, err)
		}
		app.RequireStop()
		if n, err := client.Exists(ctx, "stop:{job}").Result(); err != nil || n != 0 {
			ttl, _ := client.PTTL(ctx, "stop:{job}").Result()
			t.Fatalf("after stop the lock is still in Redis (exists=%d err=%v PTTL %v): Shutdown should release it", n, err, ttl)
		}
		if err := waitCause(t, cause); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("holder's lease context cause = %v, want core.ErrClosed", err)
		}
	})

	t.Run("control: Close", func(t *testing.T) {
		l, err := core.New(client, core.WithPrefix("close:"))
		if err != nil {
			t.Fatalf("core.New: %v", err)
		}
		cause := holdInBackground(t, l, "job")
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := waitCause(t, cause); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("holder's lease context cause = %v, want core.ErrClosed", err)
		}
		ttl, err := client.PTTL(ctx, "close:{job}").Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("control: after Close PTTL = %v, %v; want the lock still held until its TTL", ttl, err)
		}
		client.Del(ctx, "close:{job}")
	})
}

// TestOptionsOrderWithinCall: the options of one Options call apply in the
// order given (the last TTL wins), in every application built: fx shuffles
// the values of a group, so each call is one value of the group.
func TestOptionsOrderWithinCall(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	for i := range 16 {
		var l *core.Locker
		app := fxtest.New(t, universal(client),
			lockfx.Options(core.WithTTL(20*time.Second), core.WithTTL(2*time.Second)),
			lockfx.Module, fx.Populate(&l), fx.NopLogger)
		app.RequireStart()
		lease, err := l.Lock(ctx, "order")
		if err != nil {
			t.Fatalf("app %d: Lock: %v", i, err)
		}
		ttl, err := client.PTTL(ctx, core.DefaultPrefix+"{order}").Result()
		if err != nil || ttl <= 0 || ttl > 2*time.Second {
			t.Fatalf("app %d: PTTL = %v, %v; want the last TTL given (2s), not the first", i, ttl, err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("app %d: Unlock: %v", i, err)
		}
		app.RequireStop()
	}
}

// The application's start checks the deployment: a Redis that refuses
// connections fails the start, naming the node and the cause; with
// Config.StartWarnOnly the application starts anyway. Control: a healthy
// Redis starts.
func TestStartCheck(t *testing.T) {
	healthy := redistest.Start(t)
	down := redistest.Start(t)
	down.Stop()
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		addr     string
		warnOnly bool
		fails    bool
	}{
		{"control: healthy", healthy.Addr, false, false},
		{"refused", down.Addr, false, true},
		{"refused, warn only", down.Addr, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: tc.addr})
			t.Cleanup(func() { client.Close() })
			var l *core.Locker
			app := fx.New(fx.NopLogger, universal(client), fx.Supply(&lockfx.Config{StartWarnOnly: tc.warnOnly}), lockfx.Module, fx.Populate(&l))
			err := app.Start(ctx)
			if tc.fails {
				if err == nil || !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), tc.addr) || !strings.Contains(err.Error(), "refused") {
					t.Fatalf("start with Redis down = %v, want ErrUnavailable naming %s and the refusal", err, tc.addr)
				}
				return
			}
			if err != nil {
				t.Fatalf("start = %v", err)
			}
			if err := app.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
