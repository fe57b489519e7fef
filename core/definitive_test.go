package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// A failure that waiting cannot mend ends the call at once with its cause,
// whatever the wait budget (default 2s), with go-redis's default client:
// a server that refuses connections (its port closed: before, 2–4.6s and
// "no answer within the wait budget"), a wrong password, no password where
// one is required (before: "ERR Protocol error: unauthenticated multibulk
// length"), a lock key that holds another type. Control: a hung server
// (SIGSTOP; the kernel still accepts connections) is not refused, so the
// same Lock waits out its budget.
func TestDefinitiveFailuresEndAtOnce(t *testing.T) {
	const budget = 2 * time.Second
	closed := redistest.Start(t)
	closed.Stop()
	secret := redistest.Start(t)
	wrongType := redistest.Start(t)
	wctx := locktest.Context(t)
	if err := secret.Client(t).ConfigSet(wctx, "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	if err := wrongType.Client(t).Set(wctx, "lockgate:{k}", "not a lock", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		client *redis.Client
		within time.Duration
		says   string
	}{
		{"refused", redis.NewClient(&redis.Options{Addr: closed.Addr}), 300 * time.Millisecond, "connection refused"},
		{"wrong password", redis.NewClient(&redis.Options{Addr: secret.Addr, Password: "nope"}), 100 * time.Millisecond, "WRONGPASS"},
		{"no password", redis.NewClient(&redis.Options{Addr: secret.Addr}), 100 * time.Millisecond, "authentication required"},
		{"wrong type", redis.NewClient(&redis.Options{Addr: wrongType.Addr}), 100 * time.Millisecond, "WRONGTYPE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { tc.client.Close() })
			l := locktest.Locker(t, tc.client)
			ctx := locktest.Context(t)
			for _, call := range []string{"Lock", "TryLock"} {
				start := time.Now()
				var err error
				if call == "Lock" {
					_, err = l.Lock(ctx, "k", core.WithWait(budget))
				} else {
					_, err = l.TryLock(ctx, "k")
				}
				took := time.Since(start)
				t.Logf("%s: %v after %v", call, err, took.Round(time.Millisecond))
				if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
					t.Fatalf("%s = %v, want ErrUnavailable", call, err)
				}
				if !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s's error does not name the cause %q: %v", call, tc.says, err)
				}
				if took > tc.within {
					t.Errorf("%s took %v, want at once (within %v)", call, took, tc.within)
				}
			}
		})
	}

	t.Run("control: hung, not refused", func(t *testing.T) {
		srv := redistest.Start(t)
		l := locktest.Locker(t, defaultsClient(t, srv))
		warm(t, l)
		pause(t, srv)
		start := time.Now()
		_, err := l.Lock(locktest.Context(t), "k", core.WithWait(budget))
		took := time.Since(start)
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Lock on a hung server = %v, want ErrUnavailable", err)
		}
		if took < budget-100*time.Millisecond {
			t.Fatalf("Lock on a hung server returned after %v, before its %v budget: the early end is not the refusal's", took, budget)
		}
	})
}

// A busy answer says how long in words a person reads, and a Locker that
// has released nothing yet takes its hint from the holder's TTL (before: a
// fresh Locker said "likely free in 1s" of a lock held 40s more, and
// "expires in 26.555016602s"). Control: once it has seen short holds of its
// own, the hint is their mean, not the TTL.
func TestBusyHintFromTheHolder(t *testing.T) {
	srv := redistest.Start(t)
	holder, _ := locktest.NewLocker(t, srv)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := holder.Lock(ctx, "busy", core.WithTTL(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	_, err = l.TryLock(ctx, "busy")
	var be *core.BusyError
	if !errors.As(err, &be) {
		t.Fatalf("TryLock of a held lock = %v, want a *BusyError", err)
	}
	if be.RetryAfter < 35*time.Second || be.RetryAfter > 40*time.Second {
		t.Errorf("a fresh Locker's hint %v, want the holder's ~40s", be.RetryAfter)
	}
	if msg := err.Error(); !strings.Contains(msg, "likely free in 39.") && !strings.Contains(msg, "likely free in 40s") || strings.Contains(msg, "ms") {
		t.Errorf("busy text %q: want durations rounded to a tenth of a second", msg)
	}
	// Control: after a short hold of its own, the mean hold is the hint.
	own, err := l.Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryLock(ctx, "busy")
	if !errors.As(err, &be) || be.RetryAfter > time.Second {
		t.Fatalf("after a short hold of its own: %v, want a hint under a second", err)
	}
}
