package core_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Lockers made per request and dropped without Close leak nothing: once a
// Locker holds no lease its watchdog's goroutines stop (after idleStop, 10s
// by default; 200ms here), so 50 such Lockers leave no goroutine behind
// (before: 3 each, for the life of the process). Control: a Locker that
// still holds a lease keeps its watchdog, and the same check finds it.
func TestDroppedLockersLeakNothing(t *testing.T) {
	defer core.SetIdleStop(200 * time.Millisecond)()
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := locktest.Context(t)
	before := goleak.IgnoreCurrent()
	for i := 0; i < 50; i++ {
		l, err := core.New(client)
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Lock(ctx, "dropped")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// l is dropped here without Close, as a handler that made it would.
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("50 dropped Lockers left goroutines behind: %v", err)
	}

	// Control: a lease still held keeps its Locker's watchdog running.
	held, err := core.New(client)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s, err := held.Lock(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	time.Sleep(400 * time.Millisecond) // past idleStop: time is the condition under test
	if err := goleak.Find(before); err == nil {
		t.Fatal("control: a Locker holding a lease shows no goroutine: the check cannot see a leak")
	}
}
