package core_test

import (
	"errors"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// Test 2: re-entry to depth 3 through Lease.Context().
func TestReentrancyDepth3(t *testing.T) {
	srv := redistest.Start(t)
	a, c := newLocker(t, srv)
	b, _ := newLocker(t, srv)
	ctx := ctxT(t)
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
	mid, err := a.Lock(outer.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := b.Lock(mid.Context(), key) // another Locker, same owner: still re-entry
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
	holds := func(want string) {
		t.Helper()
		m := c.HGetAll(ctx, hash).Val()
		if len(m) != 2 || m["fence"] == "" {
			t.Fatalf("lock hash %v: want a fence and one owner", m)
		}
		for k, v := range m {
			if k != "fence" && v != want {
				t.Fatalf("hold count %s, want %s", v, want)
			}
		}
	}
	holds("3")
	othersBlocked("depth 3")

	for i, s := range []*core.Lease{inner, mid} {
		if err := s.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		holds([]string{"2", "1"}[i])
		othersBlocked("after an inner unlock")
	}
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
	srv := redistest.Start(t)
	a, _ := newLocker(t, srv)
	ctx := ctxT(t)
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
