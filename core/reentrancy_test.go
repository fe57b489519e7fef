package core_test

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Re-entry to depth 3 through Lease.Context(): the lock stays held (others
// busy) until the last Unlock, re-entry through the same Locker costs no
// round trip, and re-entry through another Locker on the same Redis is
// recognised by Redis (the hold's owner) and shares the hold.
func TestReentrancyDepth3(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ca := srv.Client(t)
	hook := &countingHook{}
	ca.AddHook(hook)
	a := locktest.Locker(t, ca)
	b, c := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	const key = "order:7:9"
	hash := "lockgate:{" + key + "}"

	othersBlocked := func(step string) {
		t.Helper()
		if s, err := b.TryLock(ctx, key); !errors.Is(err, core.ErrNotObtained) {
			s.Unlock(ctx)
			t.Fatalf("%s: another owner's TryLock = %v, want ErrNotObtained", step, err)
		}
		if n, _ := c.Exists(ctx, hash).Result(); n != 1 {
			t.Fatalf("%s: lock key gone too early", step)
		}
	}

	outer, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sent := hook.n.Load()
	mid, err := a.Lock(outer.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if n := hook.n.Load() - sent; n != 0 {
		t.Fatalf("re-entry through the same Locker sent %d commands, want 0", n)
	}
	inner, err := b.Lock(mid.Context(), key) // another Locker, same Redis: still re-entry
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []*core.Lease{mid, inner} {
		if s.Fence() != outer.Fence() || !s.Reentrant() {
			t.Fatalf("re-entry %d: fence %d reentrant %v, want fence %d", i+1, s.Fence(), s.Reentrant(), outer.Fence())
		}
	}
	if core.FromContext(inner.Context()) != inner || core.FromContext(mid.Context()) != mid {
		t.Fatal("FromContext does not return the innermost lease")
	}
	if m := c.HGetAll(ctx, hash).Val(); len(m) != 1 || m[ownerIn(ctx, c, hash)] != strconv.FormatInt(outer.Fence(), 10) {
		t.Fatalf("lock hash %v: want one holder, its owner, with the outer lease's fence %d (a lean hold)", m, outer.Fence())
	}
	othersBlocked("depth 3")

	for i, s := range []*core.Lease{inner, mid} {
		if err := s.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		othersBlocked("after an inner unlock")
	}
	if err := inner.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("second Unlock of a re-entry = %v, want ErrNotHeld", err)
	}
	othersBlocked("after a repeated inner unlock")
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, hash).Result(); n != 0 {
		t.Fatal("lock key left after the last Unlock")
	}
	s, err := b.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("free after the last Unlock: %v", err)
	}
	if s.Fence() <= outer.Fence() {
		t.Fatalf("next owner's fence %d not above %d", s.Fence(), outer.Fence())
	}
	s.Unlock(ctx)
}

// A context with a fresh owner does not re-enter.
func TestNewOwnerDoesNotReenter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	_, err = a.TryLock(core.NewOwner(s.Context()), "k")
	if !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock with NewOwner = %v, want ErrNotObtained", err)
	}
	if core.FromContext(core.NewOwner(s.Context())) != nil {
		t.Fatal("FromContext under NewOwner should be nil")
	}
}

// Goroutines that share a lease's context (an errgroup fan-out under a
// locked handler) and lock another key are two owners: never inside
// together (before: the owner in the context was reused for any key, and
// they were inside together 39 times in 40). Control: for the lease's own
// key they share the lease by design, and are inside together.
func TestReentryIsKeyedByLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	outer, err := l.Lock(ctx, "order:1")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)

	fanOut := func(key string) (together int) {
		for round := 0; round < 20; round++ {
			var inside, most atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					s, err := l.Lock(outer.Context(), key, core.WithWait(5*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(5 * time.Millisecond) // the critical section
					inside.Add(-1)
					s.Unlock(ctx)
				}()
			}
			close(start)
			wg.Wait()
			if most.Load() > 1 {
				together++
			}
		}
		return together
	}
	if n := fanOut("stock:7"); n != 0 {
		t.Fatalf("two goroutines sharing a lease's context were inside stock:7 together in %d of 20 rounds", n)
	}
	if n := fanOut("order:1"); n == 0 {
		t.Fatal("control: goroutines re-entering the lease's own key were never inside together")
	}
}
