package core_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A lease's context ends at the end of its validity even while the
// watchdog's goroutines do not run, as on a loaded machine: Done and Err of
// a lease, of a re-entry and of a LockMulti's lease report the loss once
// another owner could have the locks, each on a lock of its own; a lease
// within its validity stays live; once the scheduler runs it reports each
// loss exactly once. The control learns of the end only from the
// watchdog's scheduler, so it misses it.
func TestLeaseContextEndsWithoutTheWatchdog(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			var client func(t *testing.T) redis.UniversalClient
			if topo == "single" {
				srv := redistest.Start(t)
				client = func(t *testing.T) redis.UniversalClient { return srv.Client(t) }
			} else {
				cl := redistest.StartCluster(t, 3)
				client = func(t *testing.T) redis.UniversalClient { return cl.Client(t) }
			}
			fixedAndControl(t, "timer-only", func(t *testing.T, control bool, opts []core.Option) {
				var events locktest.Events
				a := locktest.Locker(t, client(t), append(opts, core.WithObserver(&events))...)
				b := locktest.Locker(t, client(t))
				ctx := locktest.Context(t)
				// fixed and control share a server: each has its own names
				k := func(name string) string { return fmt.Sprint(name, ":", control) }
				// paused before the first hold: no scheduler pass at all
				resume := core.PauseWatchdog(a)
				defer func() { resume() }() // the resume in force at return: a no-op once resumed below
				fixed := []core.LockOption{core.WithTTL(300 * time.Millisecond), core.WithoutWatchdog()}
				one, err := a.Lock(ctx, k("one"), fixed...)
				if err != nil {
					t.Fatal(err)
				}
				first, err := a.Lock(ctx, k("re"), fixed...)
				if err != nil {
					t.Fatal(err)
				}
				again, err := a.Lock(first.Context(), k("re"))
				if err != nil || !again.Reentrant() {
					t.Fatalf("re-entry: %v, %v", again, err)
				}
				multi, err := a.LockMulti(ctx, []string{k("m1"), k("m2")}, fixed...)
				if err != nil {
					t.Fatal(err)
				}
				live, err := a.Lock(ctx, k("live"), core.WithTTL(time.Minute), core.WithoutWatchdog())
				if err != nil {
					t.Fatal(err)
				}

				// Another owner takes the locks once Redis lets them go.
				for _, name := range []string{"one", "re", "m2"} {
					got, err := b.Lock(ctx, k(name), core.WithWait(5*time.Second))
					if err != nil {
						t.Fatalf("another owner waiting for %s: %v", name, err)
					}
					defer got.Unlock(context.Background())
				}
				ended := func(name string, ended bool, ctx context.Context) {
					t.Helper()
					switch {
					case ended == control:
						t.Errorf("%s's context ended: %v, after another owner took the lock (control %v)", name, ended, control)
					case ended && !errors.Is(context.Cause(ctx), core.ErrLockLost):
						t.Errorf("%s's cause: %v, want ErrLockLost", name, context.Cause(ctx))
					}
				}
				ended("the lease", one.Context().Err() != nil, one.Context())
				select { // checked alone: its first lease is not read
				case <-again.Done():
					ended("the re-entry", true, again.Context())
				default:
					ended("the re-entry", false, again.Context())
				}
				ended("the LockMulti lease", multi.Context().Err() != nil, multi.Context())
				if err := live.Context().Err(); err != nil {
					t.Fatalf("a lease within its validity ended: %v", err)
				}
				if control {
					return
				}

				// The scheduler, once it runs, reports each loss once.
				resume()
				resume = func() {}
				for _, name := range []string{"one", "re", "m1", "m2"} {
					if _, ok := events.Wait(ctx, locktest.Is(core.EventLost, k(name))); !ok {
						t.Fatalf("no loss reported for %s", name)
					}
				}
				if err := live.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				a.Close() // nothing is reported after Close
				lost := map[string]int{}
				for _, e := range events.All() {
					if e.Kind == core.EventLost {
						lost[e.Key]++
					}
				}
				if want := map[string]int{k("one"): 1, k("re"): 1, k("m1"): 1, k("m2"): 1}; !maps.Equal(lost, want) {
					t.Fatalf("losses reported: %v, want %v", lost, want)
				}
			})
		})
	}
}

// Close reports a loss that a reader of the lease's context found and the
// watchdog's scheduler never got to: with the watchdog paused from the
// start, a fixed lease expires, another owner takes the lock, the lease's
// Err marks it lost, and Close reports it exactly once, with ErrLockLost; a
// lease still within its validity ends with ErrClosed, as Close's are.
// Control: close-forgets, which takes the lost hold for a held one.
func TestCloseReportsALossOnlyAReaderSaw(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	fixedAndControl(t, "close-forgets", func(t *testing.T, control bool, opts []core.Option) {
		var events locktest.Events
		a := locktest.Locker(t, srv.Client(t), append(opts, core.WithObserver(&events))...)
		b := locktest.Locker(t, srv.Client(t))
		ctx := locktest.Context(t)
		k := func(name string) string { return fmt.Sprint("close:", name, ":", control) }
		core.PauseWatchdog(a) // never resumed: Close is the only one left to report
		lost, err := a.Lock(ctx, k("lost"), core.WithTTL(300*time.Millisecond), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		live, err := a.Lock(ctx, k("live"), core.WithTTL(time.Minute), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Lock(ctx, k("lost"), core.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("another owner waiting: %v", err)
		}
		defer got.Unlock(context.Background())
		if !errors.Is(context.Cause(lost.Context()), core.ErrLockLost) {
			t.Fatalf("the lease's context after another owner took the lock: %v, want ErrLockLost", context.Cause(lost.Context()))
		}
		for _, e := range events.All() {
			if e.Kind == core.EventLost {
				t.Fatalf("a loss reported before Close, with the watchdog paused (%s): the scenario did not happen", e.Key)
			}
		}
		a.Close()
		n := map[string]int{} // "<name> <cause>"
		for _, e := range events.All() {
			if e.Kind == core.EventLost {
				cause := "other"
				switch {
				case errors.Is(e.Err, core.ErrLockLost):
					cause = "lost"
				case errors.Is(e.Err, core.ErrClosed):
					cause = "closed"
				}
				n[e.Key+" "+cause]++
			}
		}
		if control {
			if n[k("lost")+" lost"] != 0 {
				t.Fatalf("control: losses %v; the mutant did not take effect", n)
			}
			return
		}
		if want := map[string]int{k("lost") + " lost": 1, k("live") + " closed": 1}; !maps.Equal(n, want) {
			t.Fatalf("losses reported at Close: %v, want %v", n, want)
		}
		if live.Context().Err() == nil {
			t.Fatal("a lease still live after Close")
		}
	})
}
