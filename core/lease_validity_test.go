package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A lease's context ends at the end of its validity even while the
// watchdog's goroutines do not run, as on a loaded machine: Done and Err of
// a lease, of its re-entry and of a LockMulti's lease report the loss once
// another owner could have the locks. The control learns of it only from
// the watchdog's scheduler, so it misses it.
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
				a := locktest.Locker(t, client(t), opts...)
				b := locktest.Locker(t, client(t))
				ctx := locktest.Context(t)
				fixed := []core.LockOption{core.WithTTL(300 * time.Millisecond), core.WithoutWatchdog()}
				one, err := a.Lock(ctx, "k", fixed...)
				if err != nil {
					t.Fatal(err)
				}
				again, err := a.Lock(one.Context(), "k")
				if err != nil || !again.Reentrant() {
					t.Fatalf("re-entry: %v, %v", again, err)
				}
				multi, err := a.LockMulti(ctx, []string{"m1", "m2"}, fixed...)
				if err != nil {
					t.Fatal(err)
				}
				defer core.PauseWatchdog(a)()

				// Another owner takes the locks once Redis lets them go.
				for _, k := range []string{"k", "m2"} {
					got, err := b.Lock(ctx, k, core.WithWait(5*time.Second))
					if err != nil {
						t.Fatalf("another owner waiting for %s: %v", k, err)
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
				select {
				case <-again.Done():
					ended("the re-entry", true, again.Context())
				default:
					ended("the re-entry", false, again.Context())
				}
				ended("the lease", one.Context().Err() != nil, one.Context())
				ended("the LockMulti lease", multi.Context().Err() != nil, multi.Context())
			})
		})
	}
}
