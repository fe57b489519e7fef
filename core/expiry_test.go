package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Unlock of a lease that expired and was taken by another owner
// deletes nothing of theirs and returns ErrNotHeld.
func TestUnlockAfterExpiryTakenByOther(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	old, err := a.Lock(ctx, "k", core.WithTTL(500*time.Millisecond), core.WithoutWatchdog()) // not shorter: a loaded machine's reply can outlast it
	if err != nil {
		t.Fatal(err)
	}
	within(t, old.Done(), 5*time.Second, "fixed lease ending")
	if !errors.Is(context.Cause(old.Context()), core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(old.Context()))
	}
	cur, err := b.Lock(ctx, "k", core.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("stale Unlock = %v, want ErrNotHeld", err)
	}
	if _, err := cur.TTL(ctx); err != nil {
		t.Fatalf("new holder lost its lock after the stale Unlock: %v", err)
	}
	if _, err := a.TryLock(ctx, "k"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("lock should still be held by the new owner: %v", err)
	}
	if err := cur.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The watchdog keeps a 500ms lease for 2s; without it, it expires.
func TestWatchdogKeepsLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	ttl := 500 * time.Millisecond

	s, err := a.Lock(ctx, "k", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// Another owner waits 2s (4 TTLs) for it and must not get it.
	_, err = b.Lock(ctx, "k", core.WithWait(2*time.Second))
	if !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("other owner during the hold: %v, want ErrNotObtained", err)
	}
	if d, ok := core.RetryAfter(err); !ok || d <= 0 || d > ttl {
		t.Fatalf("RetryAfter = %v, %v: want the holder's TTL in (0, %v]", d, ok, ttl)
	}
	select {
	case <-s.Done():
		t.Fatalf("lease context ended while renewed: %v", context.Cause(s.Context()))
	default:
	}
	if _, err := s.TTL(ctx); err != nil {
		t.Fatalf("still held after 2s: %v", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	fixed, err := a.Lock(ctx, "k", core.WithTTL(ttl), core.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Lock(ctx, "k", core.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("a fixed lease should expire: %v", err)
	}
	select {
	case <-fixed.Done():
	default:
		t.Fatal("fixed lease's context not cancelled when another owner obtained the lock")
	}
	got.Unlock(ctx)
	if err := fixed.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of expired fixed lease = %v", err)
	}
}
