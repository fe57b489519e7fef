package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The key deleted behind the holder's back: the next renewal finds
// it gone and cancels the lease context with ErrLockLost.
func TestLostWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var lost atomic.Int32
	told := make(chan struct{}, 1)
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		if e.Kind == core.EventLost {
			lost.Add(1)
			told <- struct{}{}
		}
	})
	a, c := locktest.NewLocker(t, srv, core.WithObserver(obs))
	ctx := locktest.Context(t)
	s, err := a.Lock(ctx, "k", core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, "lockgate:{k}").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, s.Done(), 5*time.Second, "loss noticed")
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	// The Observer is told right after the context is cancelled, on the
	// watchdog's goroutine: wait for it, then count.
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("the Observer was not told of the loss within 5s")
	}
	if lost.Load() != 1 {
		t.Fatalf("observer saw %d losses, want 1", lost.Load())
	}
	if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld", err)
	}
}

// The server paused past the TTL: renewals cannot get through, and
// the holder's context is cancelled (ErrLockLost) at the end of its validity,
// before the server — once resumed — hands the lock to another owner.
func TestLostBeforeOtherOwnerWhenServerPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	ttl := 300 * time.Millisecond
	s, err := a.Lock(ctx, "k", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	var lostAt atomic.Int64
	stopAfter := context.AfterFunc(s.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	defer stopAfter()
	if d := s.Valid(); time.Until(d) > ttl {
		t.Fatalf("lease validity %v: want under the TTL from now", d)
	}

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	// The fault: the server stays stopped for longer than the lease (the
	// pause is the fault being injected, not a synchronisation).
	time.Sleep(ttl + 200*time.Millisecond)
	type res struct {
		at  int64
		err error
	}
	got := make(chan res, 1)
	go func() {
		s2, err := b.Lock(ctx, "k", core.WithWait(5*time.Second))
		at := time.Now().UnixNano()
		if err == nil {
			s2.Unlock(ctx)
		}
		got <- res{at, err}
	}()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("other owner after resume: %v", r.err)
	}
	within(t, s.Done(), time.Second, "lease context cancelled")
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if l := lostAt.Load(); l == 0 || l >= r.at {
		t.Fatalf("holder learned of the loss at %d, other owner obtained at %d: must be before", l, r.at)
	}
}
