package core_test

import (
	"errors"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

func TestLockUnlockBasics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, c := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "order:1:2")
	if err != nil {
		t.Fatal(err)
	}
	if s.Fence() <= 0 || s.Key() != "order:1:2" {
		t.Fatalf("fence %d key %q", s.Fence(), s.Key())
	}
	if n, _ := c.Exists(ctx, "lockgate:{order:1:2}").Result(); n != 1 {
		t.Fatalf("lock hash missing")
	}
	if _, err := l.TryLock(ctx, "order:1:2"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock on held key: %v", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	if n, _ := c.Exists(ctx, "lockgate:{order:1:2}").Result(); n != 0 {
		t.Fatalf("lock hash left behind")
	}
}

// A Locker that never locked owns no goroutine, so one created in a failed
// fx graph (never closed) leaks nothing; goleak in TestMain checks it.
func TestNewStartsNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	_ = core.Must(core.New(srv.Client(t))) // deliberately never closed
}
