package core_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
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
	t.Parallel()
	// atOnce is a quarter of the budget: the refused call (a probe's dial)
	// takes ~200ms, the others a round trip, and a loaded machine running
	// the race detector has taken 120ms for one; the control waits it all.
	const budget, atOnce = 2 * time.Second, 500 * time.Millisecond
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
		says   string
	}{
		{"refused", redis.NewClient(&redis.Options{Addr: closed.Addr}), "connection refused"},
		{"wrong password", redis.NewClient(&redis.Options{Addr: secret.Addr, Password: "nope"}), "WRONGPASS"},
		{"no password", redis.NewClient(&redis.Options{Addr: secret.Addr}), "authentication required"},
		{"wrong type", redis.NewClient(&redis.Options{Addr: wrongType.Addr}), "WRONGTYPE"},
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
				if took > atOnce {
					t.Errorf("%s took %v, want at once (within %v)", call, took, atOnce)
				}
			}
		})
	}

	t.Run("control: hung, not refused", func(t *testing.T) {
		srv := redistest.Start(t)
		l := locktest.Locker(t, defaultsClient(t, srv))
		locktest.Warm(t, l)
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
	t.Parallel()
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

// A queued waiter whose next attempt finds the server refusing connections
// ends at once (a plain client: ErrUnavailable naming the refusal) and, once
// Redis answers again, leaves the queue: its entry does not stay live for
// the rest of its life (TTL/2, 15s by default), during which the holder's
// release would grant the lock to a caller that is gone and every other
// waiter would wait for that grant to expire. The refusal is a real one: the
// waiter's client dials a closed port once its connection was killed.
// Control: with the keep-entry mutant (the fixed defect: a failure that
// never reached Redis undid nothing, though the waiter had queued) the entry
// is still live 3s later.
func TestRefusedWaiterLeavesQueue(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "keep-entry"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			srv := redistest.Start(t)
			closed := redistest.Start(t)
			closed.Stop()
			var refusing atomic.Bool
			wc := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if refusing.Load() {
					addr = closed.Addr
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}})
			t.Cleanup(func() { wc.Close() })
			var events locktest.Events
			waiter := locktest.Locker(t, wc, core.WithObserver(&events), core.WithMutants(mutant))
			holder, admin := locktest.NewLocker(t, srv)
			ctx := locktest.Context(t)
			s, err := holder.Lock(ctx, "k", core.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unlock(ctx)
			ended := make(chan error, 1)
			go func() {
				_, err := waiter.Lock(ctx, "k", core.WithWait(10*time.Second))
				ended <- err
			}()
			if _, ok := events.Wait(ctx, locktest.Is(core.EventWaiting, "k")); !ok {
				t.Fatal("the waiter never queued")
			}
			// A connection held out of the pool keeps the reach probe off
			// the next attempt (it watches only a client without any), so
			// the attempt fails on its own dial, which never reached Redis:
			// the case the mutant leaves undone. (A probe's refusal says the
			// call may have run, and is undone anyway.)
			pinned := wc.Conn()
			defer pinned.Close()
			if err := pinned.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			// Its next attempt comes when the holder's TTL as last seen (1s)
			// runs out: by then it dials, and is refused.
			refusing.Store(true)
			if err := admin.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err != nil {
				t.Fatal(err)
			}
			err = <-ended
			if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "probe") {
				t.Fatalf("the refused waiter's Lock = %v, want ErrUnavailable naming its own refused dial", err)
			}
			refusing.Store(false)
			// A call of the waiter's Locker answered: its undos go now.
			other, err := waiter.TryLock(ctx, "other")
			if err != nil {
				t.Fatal(err)
			}
			other.Unlock(ctx)
			deadline := time.Now().Add(3 * time.Second)
			var info core.LockInfo
			for {
				if info, err = holder.Inspect(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if info.Waiters == 0 || time.Now().After(deadline) {
					break
				}
				poll := time.NewTimer(50 * time.Millisecond)
				<-poll.C
			}
			switch {
			case mutant == "" && info.Waiters != 0:
				t.Fatalf("the refused waiter's entry is still live 3s after it ended (%d waiters)", info.Waiters)
			case mutant != "" && info.Waiters == 0:
				t.Fatal("control: with the keep-entry mutant the refused waiter's entry is gone: the check cannot see the defect")
			}
		})
	}
}
