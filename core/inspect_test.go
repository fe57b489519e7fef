package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// queued waits until the Lock of key observed by ev has joined the lock's
// queue (EventWaiting: its first attempt wrote the entry) and returns what
// Inspect then reads.
func queued(t *testing.T, ev *locktest.Events, l *core.Locker, key string) core.LockInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, ok := ev.Wait(ctx, locktest.Is(core.EventWaiting, key)); !ok {
		t.Fatalf("the Lock of %s did not start waiting within 5s", key)
	}
	info, err := l.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Inspect reads a held lock without taking it: held, its fence, TTL, age
// and live waiters; a free lock reads free; nothing is changed (the holder
// keeps its hold, the waiter still waits). Checked on one server, a Cluster
// and a Redlock of three.
func TestInspect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	srvs, _ := masters(t, 3)
	for _, tc := range []struct {
		name string
		l    func(...core.Option) *core.Locker
	}{
		{"single", func(o ...core.Option) *core.Locker { l, _ := locktest.NewLocker(t, srv, o...); return l }},
		{"cluster", func(o ...core.Option) *core.Locker { return locktest.Locker(t, cl.Client(t), o...) }},
		{"redlock", func(o ...core.Option) *core.Locker { return redlockOn(t, srvs, o...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev locktest.Events
			l, other := tc.l(), tc.l(core.WithObserver(&ev))
			ctx := locktest.Context(t)
			if info, err := l.Inspect(ctx, "inspect:1"); err != nil || info.Held || info.Fence != 0 || info.Key != "inspect:1" {
				t.Fatalf("free lock: %+v, %v", info, err)
			}
			start := time.Now()
			s, err := l.Lock(ctx, "inspect:1", core.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unlock(ctx)
			got := make(chan error, 1)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				w, err := other.Lock(wctx, "inspect:1", core.WithWait(20*time.Second))
				if err == nil {
					w.Unlock(ctx)
				}
				got <- err
			}()
			want := 1
			if tc.name == "redlock" {
				want = 0 // Redlock waiters are told, not queued
			}
			info := queued(t, &ev, l, "inspect:1")
			if !info.Held || info.Fence != s.Fence() || info.Waiters != want {
				t.Errorf("held lock: %+v, want held, fence %d, %d waiters", info, s.Fence(), want)
			}
			if info.TTL <= 8*time.Second || info.TTL > 10*time.Second {
				t.Errorf("TTL %v, want just under 10s", info.TTL)
			}
			if info.Age > time.Since(start)+50*time.Millisecond {
				t.Errorf("age %v, more than the %v since Lock", info.Age, time.Since(start))
			}
			if _, err := s.TTL(ctx); err != nil {
				t.Errorf("the holder lost its hold after Inspect: %v", err)
			}
			stop()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Errorf("the waiter got %v while the lock was held", err)
			}
			if _, err := l.Inspect(ctx, ""); !errors.Is(err, core.ErrInvalid) {
				t.Errorf("Inspect(\"\") = %v, want ErrInvalid", err)
			}
		})
	}
}

// List finds exactly the locks that exist and match, on every master of a
// Cluster and a Redlock, also with names that need escaping; the limit
// cuts it.
func TestList(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	srvs, _ := masters(t, 3)
	for _, tc := range []struct {
		name string
		l    func() *core.Locker
	}{
		{"single", func() *core.Locker { l, _ := locktest.NewLocker(t, srv); return l }},
		{"cluster", func() *core.Locker { return locktest.Locker(t, cl.Client(t)) }},
		{"redlock", func() *core.Locker { return redlockOn(t, srvs) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l()
			ctx := locktest.Context(t)
			var want []string
			for i := range 12 {
				want = append(want, fmt.Sprintf("order:%d:7", i))
			}
			want = append(want, "order:odd}name%:7")
			for _, k := range append(slices.Clone(want), "other:1", "orders") {
				s, err := l.Lock(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Unlock(ctx)
			}
			got, err := l.List(ctx, "order:*", 0)
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("List(order:*) = %q\nwant %q", got, want)
			}
			if got, _ := l.List(ctx, "order:odd}*", 0); len(got) != 1 || got[0] != "order:odd}name%:7" {
				t.Errorf("List of an escaped name = %q", got)
			}
			if got, _ := l.List(ctx, "order:*", 5); len(got) != 5 {
				t.Errorf("List with limit 5 returned %d", len(got))
			}
			if tc.name == "cluster" {
				// probe: the locks really are spread over the masters
				nodes := map[string]bool{}
				c := cl.Client(t)
				for _, k := range want {
					slot, _ := c.ClusterKeySlot(ctx, "lockgate:{"+k+"}").Result()
					nodes[cl.ServerForSlot(int(slot)).Addr] = true
				}
				if len(nodes) < 2 {
					t.Fatalf("probe: all test locks on one master")
				}
			}
		})
	}
}

// ForceRelease removes the hold whoever has it: the holder loses it at its
// next renewal (its context is cancelled with ErrLockLost), the first
// waiter is granted the lock. On a free lock it does nothing.
func TestForceRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var ev locktest.Events
	other, _ := locktest.NewLocker(t, srv, core.WithObserver(&ev))
	ctx := locktest.Context(t)
	if info, err := l.ForceRelease(ctx, "stuck:1"); err != nil || info.Held {
		t.Fatalf("ForceRelease of a free lock = %+v, %v", info, err)
	}
	s, err := l.Lock(ctx, "stuck:1", core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		w, err := other.Lock(ctx, "stuck:1", core.WithWait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	if info := queued(t, &ev, l, "stuck:1"); info.Waiters != 1 {
		t.Fatalf("Inspect counts %d waiters, want 1", info.Waiters)
	}
	info, err := l.ForceRelease(ctx, "stuck:1")
	if err != nil || !info.Held || info.Fence != s.Fence() {
		t.Fatalf("ForceRelease = %+v, %v; want the holder's hold (fence %d)", info, err, s.Fence())
	}
	w := <-got
	if w == nil {
		t.Fatal("the waiter was not granted the lock")
	}
	defer w.Unlock(ctx)
	if w.Fence() <= s.Fence() {
		t.Errorf("the waiter's fence %d is not above the removed one %d", w.Fence(), s.Fence())
	}
	within(t, s.Done(), 5*time.Second, "the removed holder noticing the loss at its next renewal")
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Errorf("the removed holder's context cause = %v, want ErrLockLost", cause)
	}
}

// ForceRelease removes only the hold it inspected, however that hold ended
// meanwhile: a holder that unlocked (its done marker says "released") and a
// new owner that took the lock leave it nothing to remove — ErrNotHeld, the
// new holder untouched. And a holder whose hold was removed learns it from
// its own Unlock (ErrNotHeld), not a success. Redlock too.
func TestForceReleaseRemovesOnlyWhatItSaw(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srvs, _ := masters(t, 3)
	for _, tc := range []struct {
		name string
		l    func() *core.Locker
	}{
		{"single", func() *core.Locker { l, _ := locktest.NewLocker(t, srv); return l }},
		{"redlock", func() *core.Locker { return redlockOn(t, srvs) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, other := tc.l(), tc.l()
			ctx := locktest.Context(t)
			// The operator's two steps, with the holder's unlock and a new
			// owner in between: Inspect saw the first hold.
			s, err := l.Lock(ctx, "stuck:2")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := other.Lock(ctx, "stuck:2")
			if err != nil {
				t.Fatal(err)
			}
			if err := core.ForceReleaseOwner(ctx, l, "stuck:2", s); !errors.Is(err, core.ErrNotHeld) {
				t.Errorf("force release of a hold that ended = %v, want ErrNotHeld", err)
			}
			if _, err := n.TTL(ctx); err != nil {
				t.Errorf("the new holder lost its hold: %v", err)
			}
			// Removed under the holder: its Unlock says so.
			if info, err := l.ForceRelease(ctx, "stuck:2"); err != nil || info.Fence != n.Fence() {
				t.Fatalf("ForceRelease = %+v, %v", info, err)
			}
			if err := n.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
				t.Errorf("the removed holder's Unlock = %v, want ErrNotHeld", err)
			}
		})
	}
}

// The operator's calls are bounded by their context's deadline, not by the
// client's timeouts (go-redis defaults: a 3s read timeout, retries): on a
// SIGSTOPped Redis, Inspect, ForceRelease and List answer ErrUnavailable
// within 200ms (+ slack). The probe: each answers before the pause.
func TestInspectHungWithinBudget(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := locktest.Locker(t, defaultsClient(t, srv))
	ctx := locktest.Context(t)
	calls := map[string]func(context.Context) error{
		"Inspect":      func(ctx context.Context) error { _, err := l.Inspect(ctx, "k"); return err },
		"ForceRelease": func(ctx context.Context) error { _, err := l.ForceRelease(ctx, "k"); return err },
		"List":         func(ctx context.Context) error { _, err := l.List(ctx, "*", 0); return err },
	}
	for name, call := range calls {
		if err := call(ctx); err != nil {
			t.Fatalf("probe: %s before the pause: %v", name, err)
		}
	}
	resume := pause(t, srv)
	defer resume()
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := call(cctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("%s on a hung Redis: %v, want ErrUnavailable", name, err)
		}
		if took > 200*time.Millisecond+budgetSlack {
			t.Errorf("%s took %v with a 200ms deadline", name, took)
		}
	}
}
