package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A read lease of another lock (a Locker under another prefix) in ctx does
// not make Lock of the same name an upgrade: it is a fresh acquisition, as
// with another lock's write lease (the control).
func TestRLockUpgradeOnlyOfTheSameLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := locktest.Context(t)
	other, _ := locktest.NewLocker(t, srv, core.WithPrefix("other:"))
	l, _ := locktest.NewLocker(t, srv)

	w, err := other.Lock(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Lock(w.Context(), "k2", core.WithWait(core.NoWait))
	if err != nil || s.Reentrant() {
		t.Fatalf("control: Lock in another prefix's write lease's context = %v, want a fresh hold", err)
	}
	s.Unlock(ctx)
	w.Unlock(ctx)

	r, err := other.RLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	s, err = l.Lock(r.Context(), "k", core.WithWait(core.NoWait))
	if err != nil {
		t.Fatalf("Lock of another prefix's name in a read lease's context = %v, want a fresh hold (another lock)", err)
	}
	s.Unlock(ctx)
}

// Every event of a re-entered read hold says Read, the re-entry's
// EventAcquired included.
func TestRLockReentryEventSaysRead(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var events locktest.Events
	l, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	r, err := l.RLock(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	in, err := l.RLock(r.Context(), "ev")
	if err != nil || !in.Reentrant() {
		t.Fatalf("re-entry = %v", err)
	}
	in.Unlock(ctx)
	r.Unlock(ctx)
	all := events.All()
	if len(all) != 4 {
		t.Fatalf("%d events, want 4 (two acquired, two released)", len(all))
	}
	for _, e := range all {
		if !e.Read {
			t.Errorf("event %v (reentrant %v) of a read hold has Read false", e.Kind, e.Reentrant)
		}
	}
}

// Inspect's TTL of a lock that readers hold is the longest-lived live
// reader's, not that of one that has left (the hash's own expiry only
// grows).
func TestRLockInspectTTLOfLiveReaders(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	r1, err := l.RLock(ctx, "ttl", core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, "ttl", core.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Unlock(ctx)
	if info, err := l.Inspect(ctx, "ttl"); err != nil || info.TTL <= 5*time.Second {
		t.Fatalf("Inspect with a reader of a minute = %+v, %v; want its TTL", info, err)
	}
	r1.Unlock(ctx)
	info, err := l.Inspect(ctx, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if info.Readers != 1 || info.TTL > 5*time.Second || info.TTL <= 0 {
		t.Fatalf("Inspect with one reader of 5s left = Readers %d, TTL %v; want 1 and at most 5s", info.Readers, info.TTL)
	}
}

// testReaderRenewsBeside: one Locker holds, with short TTLs, a lock, a
// permit and read locks of names in one slot and of other slots, all
// renewed in the watchdog's batches: each lives past three TTLs. Control:
// a read lock of the same batch without the watchdog has expired by then.
func testReaderRenewsBeside(t *testing.T, c redis.UniversalClient) {
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	ttl := 300 * time.Millisecond
	o := core.WithTTL(ttl)
	var all []*core.Lease
	add := func(s *core.Lease, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	add(l.Lock(ctx, "mix-w", o))
	add(l.Semaphore(ctx, "mix", 2, o))
	add(l.RLock(ctx, "mix", o))
	add(l.RLock(ctx, "mix", o))
	add(l.RLock(ctx, "other-r", o))
	add(l.Lock(ctx, "other-w", o))
	fixed, err := l.RLock(ctx, "mix", o, core.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl) // three TTLs pass: the work
	for i, s := range all {
		if s.Context().Err() != nil {
			t.Fatalf("lease %d (%s) ended: %v", i, s.Key(), context.Cause(s.Context()))
		}
		if d, err := s.TTL(ctx); err != nil || d <= 0 {
			t.Fatalf("lease %d (%s) TTL after three TTLs = %v, %v", i, s.Key(), d, err)
		}
	}
	if d, err := fixed.TTL(ctx); err == nil {
		t.Fatalf("control: a read lock without the watchdog still held after three TTLs (TTL %v)", d)
	}
	for _, s := range all {
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRLockRenewsBeside(t *testing.T) {
	t.Parallel()
	testReaderRenewsBeside(t, redistest.Start(t).Client(t))
}

func TestRLockRenewsBesideOnCluster(t *testing.T) {
	t.Parallel()
	testReaderRenewsBeside(t, redistest.StartCluster(t, 3).Client(t))
}
