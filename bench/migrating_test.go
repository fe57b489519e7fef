package bench

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// The claims of docs/migrating.md, on a real Redis: a lock taken with
// redislock or redsync and one taken with lockgate on the same name do not
// exclude each other (different keys), and the cut-over's lock, the old
// lock and then lockgate's, excludes both an old-only and a lockgate-only
// holder.

const migratingName = "order:1:2"

// oldLock is a lock taken as the code being migrated takes it: take makes
// one attempt on name and returns what gives it back; busy reports whether
// take's error means that another owner holds it.
type oldLock struct {
	name string
	take func(ctx context.Context, name string) (release func() error, err error)
	busy func(err error) bool
}

func oldLocks(c *redis.Client) []oldLock {
	rl := redislock.New(c)
	rs := redsync.New(goredis.NewPool(c))
	return []oldLock{
		{
			name: "redislock",
			take: func(ctx context.Context, name string) (func() error, error) {
				lock, err := rl.Obtain(ctx, name, 10*time.Second, nil) // no RetryStrategy: one attempt
				if err != nil {
					return nil, err
				}
				return func() error { return lock.Release(context.Background()) }, nil
			},
			busy: func(err error) bool { return errors.Is(err, redislock.ErrNotObtained) },
		},
		{
			name: "redsync",
			take: func(ctx context.Context, name string) (func() error, error) {
				m := rs.NewMutex(name, redsync.WithExpiry(10*time.Second))
				if err := m.TryLockContext(ctx); err != nil {
					return nil, err
				}
				return func() error {
					if ok, err := m.UnlockContext(context.Background()); err != nil || !ok {
						return errors.Join(errors.New("redsync: not unlocked"), err)
					}
					return nil
				}, nil
			},
			busy: func(err error) bool {
				var taken *redsync.ErrTaken
				return errors.As(err, &taken)
			},
		},
	}
}

// lockBoth is the lock of the cut-over's first step (docs/migrating.md):
// the old lock, then lockgate's on the same name; when lockgate's is not
// obtained the old one is given back, so on an error nothing is held.
func lockBoth(ctx context.Context, old oldLock, l *core.Locker, name string, opts ...core.LockOption) (unlock func() error, err error) {
	release, err := old.take(ctx, name)
	if err != nil {
		return nil, err
	}
	lease, err := l.Lock(ctx, name, opts...)
	if err != nil {
		return nil, errors.Join(err, release())
	}
	return func() error { return errors.Join(lease.Unlock(context.Background()), release()) }, nil
}

// obtainBoth is docs/migrating.md's snippet of the cut-over's first step
// with redislock, as it is printed there.
func obtainBoth(ctx context.Context, rl *redislock.Client, l *core.Locker, name string) (*core.Lease, func() error, error) {
	old, err := rl.Obtain(ctx, name, 10*time.Second, nil) // as the old code obtains it
	if err != nil {
		return nil, nil, err
	}
	lease, err := l.Lock(ctx, name)
	if err != nil {
		return nil, nil, errors.Join(err, old.Release(context.Background()))
	}
	unlock := func() error {
		return errors.Join(lease.Unlock(context.Background()), old.Release(context.Background()))
	}
	return lease, unlock, nil
}

// giveBack releases what a take or lockBoth that should have been refused
// obtained, so that one failure does not spill into the next case.
func giveBack(release func() error) {
	if release != nil {
		release()
	}
}

// newLocker is a lockgate Locker on its own client of srv (one process of
// the new code), closed in t.Cleanup.
func newLocker(t *testing.T, srv *redistest.Server) *core.Locker {
	t.Helper()
	l, err := core.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Shutdown(context.Background()) })
	return l
}

// TestMigratingNoExclusion: while redislock (or redsync) holds "order:1:2",
// lockgate's TryLock of the same name succeeds: the two keep the lock in
// different keys (a string named order:1:2, a hash named
// lockgate:{order:1:2}). Control: a second attempt of the old library on
// the name is refused, so the lock is really held.
func TestMigratingNoExclusion(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	l := newLocker(t, srv)
	for _, old := range oldLocks(c) {
		t.Run(old.name, func(t *testing.T) {
			ctx := context.Background()
			release, err := old.take(ctx, migratingName)
			if err != nil {
				t.Fatalf("%s: first holder: %v", old.name, err)
			}
			defer func() {
				if err := release(); err != nil {
					t.Errorf("%s: release: %v", old.name, err)
				}
			}()
			if again, err := old.take(ctx, migratingName); !old.busy(err) {
				giveBack(again)
				t.Fatalf("control: a second %s holder: %v, want it refused as busy", old.name, err)
			}
			lease, err := l.TryLock(ctx, migratingName)
			if err != nil {
				t.Fatalf("lockgate TryLock while %s holds %q: %v, want the lock (no exclusion)", old.name, migratingName, err)
			}
			defer lease.Unlock(ctx)
			for key, want := range map[string]string{migratingName: "string", "lockgate:{" + migratingName + "}": "hash"} {
				if typ, err := c.Type(ctx, key).Result(); err != nil || typ != want {
					t.Errorf("TYPE %s = %q, %v; want %s", key, typ, err, want)
				}
			}
		})
	}
}

// TestMigratingGuideSnippet: the guide prints obtainBoth as it is here;
// it holds both locks (an old-only and a lockgate-only holder are refused)
// and, refused by either, holds neither.
func TestMigratingGuideSnippet(t *testing.T) {
	doc, err := os.ReadFile("../docs/migrating.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("migrating_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile(`(?s)\nfunc obtainBoth\(.*?\n}\n`).Find(src)
	if fn == nil || !strings.Contains(string(doc), "```go"+string(fn)+"```") {
		t.Fatal("docs/migrating.md does not print obtainBoth as migrating_test.go has it")
	}

	srv := redistest.Start(t)
	c := srv.Client(t)
	rl := redislock.New(c)
	both, alone := newLocker(t, srv), newLocker(t, srv)
	ctx := context.Background()

	lease, unlock, err := obtainBoth(ctx, rl, both, migratingName)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Fence() <= 0 {
		t.Errorf("fence %d, want > 0", lease.Fence())
	}
	if old, err := rl.Obtain(ctx, migratingName, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		if old != nil {
			old.Release(ctx)
		}
		t.Errorf("old-only holder while both are held: %v, want ErrNotObtained", err)
	}
	if other, err := alone.TryLock(ctx, migratingName); !errors.Is(err, core.ErrNotObtained) {
		other.Unlock(ctx)
		t.Errorf("lockgate-only holder while both are held: %v, want ErrNotObtained", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	other, err := alone.TryLock(ctx, migratingName)
	if err != nil {
		t.Fatal(err)
	}
	if _, unlock, err := obtainBoth(ctx, rl, both, migratingName); !errors.Is(err, core.ErrNotObtained) {
		giveBack(unlock)
		t.Fatalf("obtainBoth while lockgate's lock is held: %v, want ErrNotObtained after the wait", err)
	}
	if n, err := c.Exists(ctx, migratingName).Result(); err != nil || n != 0 {
		t.Errorf("the old lock after the refusal: EXISTS %d, %v; want it given back", n, err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMigratingDualLock: the cut-over's lock (lockBoth) excludes a holder
// of the old lock only (the code not yet moved) and a holder of lockgate's
// only (the code of the last step), both ways, and leaves nothing held when
// it is refused. TestMigratingNoExclusion is the control: without the old
// lock, an old-only holder is not excluded.
func TestMigratingDualLock(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	both, alone := newLocker(t, srv), newLocker(t, srv)
	once := core.WithWait(core.NoWait)
	for _, old := range oldLocks(c) {
		t.Run(old.name, func(t *testing.T) {
			ctx := context.Background()
			t.Run("both held, old-only refused", func(t *testing.T) {
				unlock, err := lockBoth(ctx, old, both, migratingName, once)
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
				if other, err := old.take(ctx, migratingName); !old.busy(err) {
					giveBack(other)
					t.Fatalf("old-only holder: %v, want busy", err)
				}
			})
			t.Run("both held, lockgate-only refused", func(t *testing.T) {
				unlock, err := lockBoth(ctx, old, both, migratingName, once)
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
				if other, err := alone.TryLock(ctx, migratingName); !errors.Is(err, core.ErrNotObtained) {
					other.Unlock(ctx) // nil-safe
					t.Fatalf("lockgate-only holder: %v, want ErrNotObtained", err)
				}
			})
			t.Run("old-only held, both refused", func(t *testing.T) {
				release, err := old.take(ctx, migratingName)
				if err != nil {
					t.Fatal(err)
				}
				defer release()
				if unlock, err := lockBoth(ctx, old, both, migratingName, once); !old.busy(err) {
					giveBack(unlock)
					t.Fatalf("lockBoth: %v, want busy", err)
				}
				if info, err := both.Inspect(ctx, migratingName); err != nil || info.Held {
					t.Fatalf("lockgate's lock after the refusal: %+v, %v; want it free", info, err)
				}
			})
			t.Run("lockgate-only held, both refused, old lock given back", func(t *testing.T) {
				lease, err := alone.TryLock(ctx, migratingName)
				if err != nil {
					t.Fatal(err)
				}
				defer lease.Unlock(ctx)
				if unlock, err := lockBoth(ctx, old, both, migratingName, once); !errors.Is(err, core.ErrNotObtained) {
					giveBack(unlock)
					t.Fatalf("lockBoth: %v, want ErrNotObtained", err)
				}
				if n, err := c.Exists(ctx, migratingName).Result(); err != nil || n != 0 {
					t.Fatalf("the old lock's key after the refusal: EXISTS %d, %v; want it given back", n, err)
				}
			})
		})
	}
}
