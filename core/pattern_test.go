package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Every event of a call and of its lease names the call's pattern, never
// the key; without WithPattern it is UnnamedPattern. Covers acquired,
// re-entered, renewed, extended, released and not obtained.
func TestEventsCarryThePattern(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var mu sync.Mutex
	var evs []core.Event
	renewed := make(chan struct{})
	var once sync.Once
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
		if e.Kind == core.EventRenewed {
			once.Do(func() { close(renewed) })
		}
	})
	l, _ := locktest.NewLocker(t, srv, core.WithObserver(obs))
	ctx := locktest.Context(t)
	const pattern = "order:{user}:{voucher}"
	s, err := l.Lock(ctx, "order:42:7", core.WithPattern(pattern), core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Lock(s.Context(), "order:42:7", core.WithPattern(pattern))
	if err != nil {
		t.Fatal(err)
	}
	inner.Unlock(ctx)
	if err := s.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	within(t, renewed, 5*time.Second, "a watchdog renewal (every TTL/3)")
	other, _ := locktest.NewLocker(t, srv, core.WithObserver(obs))
	if _, err := other.TryLock(ctx, "order:42:7", core.WithPattern(pattern)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	s.Unlock(ctx)
	u, err := l.Lock(ctx, "plain:1")
	if err != nil {
		t.Fatal(err)
	}
	u.Unlock(ctx)

	mu.Lock()
	got := append([]core.Event(nil), evs...)
	mu.Unlock()
	seen := map[core.EventKind]bool{}
	for _, e := range got {
		want := pattern
		if strings.HasPrefix(e.Key, "plain:") {
			want = core.UnnamedPattern
		}
		if e.Pattern != want {
			t.Errorf("%v event of %s has pattern %q, want %q", e.Kind, e.Key, e.Pattern, want)
		}
		seen[e.Kind] = true
	}
	for _, k := range []core.EventKind{core.EventAcquired, core.EventRenewed, core.EventExtended, core.EventReleased, core.EventNotObtained} {
		if !seen[k] {
			t.Errorf("probe: no %v event was observed", k)
		}
	}
	if _, err := l.Lock(ctx, "x", core.WithPattern("")); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("WithPattern(\"\") = %v, want ErrInvalid", err)
	}
	long, err := l.Lock(ctx, "long", core.WithPattern(strings.Repeat("p", core.MaxPatternLen+1)))
	if err != nil {
		t.Fatalf("a long pattern is cut, not refused: %v", err)
	}
	long.Unlock(ctx)
}
