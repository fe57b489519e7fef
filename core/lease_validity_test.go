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
				defer resume()
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
