package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// The same Locker on the two other deployments it supports: a Redis Cluster
// (*redis.ClusterClient) and a master found through Sentinel
// (redis.NewFailoverClient). Each test uses two clients, as two processes
// of a service would.

func TestOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	a, b := cl.Client(t), cl.Client(t)
	testBasics(t, a, b)
	t.Run("WaiterWokenByRelease", func(t *testing.T) { testWaiterWokenByRelease(t, a, b, "topo:wake") })
	t.Run("NotifyOnItsShard", func(t *testing.T) { testNotifyOnItsShard(t, cl, a, b) })
	t.Run("LockKeysShareOneSlot", func(t *testing.T) { testKeysShareSlot(t, cl, a) })
}

func TestOnSentinel(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinel(t)
	a, b := st.Client(t), st.Client(t)
	testBasics(t, a, b)
	t.Run("WaiterWokenByRelease", func(t *testing.T) { testWaiterWokenByRelease(t, a, b, "topo:wake") })
}

// testBasics: Lock/Unlock, re-entry through the lease's context, and a
// TryLock from a second Locker (on its own client) finding the lock busy.
func testBasics(t *testing.T, a, b redis.UniversalClient) {
	t.Run("LockUnlock", func(t *testing.T) {
		l := locktest.Locker(t, a)
		ctx := locktest.Context(t)
		s, err := l.Lock(ctx, "topo:basic")
		if err != nil {
			t.Fatal(err)
		}
		if s.Fence() <= 0 {
			t.Fatalf("fence %d", s.Fence())
		}
		if n, err := b.Exists(ctx, "lockgate:{topo:basic}").Result(); err != nil || n != 1 {
			t.Fatalf("lock hash seen through the other client: %d, %v", n, err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
		}
		if n, err := b.Exists(ctx, "lockgate:{topo:basic}").Result(); err != nil || n != 0 {
			t.Fatalf("lock hash after Unlock: %d, %v", n, err)
		}
	})

	t.Run("ReentryThroughLeaseContext", func(t *testing.T) {
		la, lb := locktest.Locker(t, a), locktest.Locker(t, b)
		ctx := locktest.Context(t)
		outer, err := la.Lock(ctx, "topo:reentry")
		if err != nil {
			t.Fatal(err)
		}
		inner, err := la.Lock(outer.Context(), "topo:reentry", core.WithWait(0))
		if err != nil {
			t.Fatalf("re-entry: %v", err)
		}
		if !inner.Reentrant() || inner.Fence() != outer.Fence() {
			t.Fatalf("re-entry: reentrant %v, fence %d, outer fence %d", inner.Reentrant(), inner.Fence(), outer.Fence())
		}
		if err := inner.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// One hold is left: still busy for another owner.
		if _, err := lb.TryLock(ctx, "topo:reentry"); !errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("TryLock with one hold left: %v, want ErrNotObtained", err)
		}
		if err := outer.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := lb.TryLock(ctx, "topo:reentry")
		if err != nil {
			t.Fatalf("TryLock after the last Unlock: %v", err)
		}
		s.Unlock(ctx)
	})

	t.Run("TryLockBusyFromSecondLocker", func(t *testing.T) {
		la, lb := locktest.Locker(t, a), locktest.Locker(t, b)
		ctx := locktest.Context(t)
		s, err := la.Lock(ctx, "topo:busy", core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		_, err = lb.TryLock(ctx, "topo:busy")
		if !errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("TryLock on a held lock: %v, want ErrNotObtained", err)
		}
		if ra, ok := core.RetryAfter(err); !ok || ra <= 0 || ra > time.Minute {
			t.Fatalf("RetryAfter %v, %v: want the holder's TTL", ra, ok)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Control: free again, the same call succeeds.
		s2, err := lb.TryLock(ctx, "topo:busy")
		if err != nil {
			t.Fatalf("TryLock after Unlock: %v", err)
		}
		s2.Unlock(ctx)
	})
}

// waitResult is the outcome of a waiting Lock: its error, and whether it
// returned before its wait budget ended. Obtaining the lock at the end of
// the budget (the last attempt finds it free) is not a wake-up by the
// release notification.
type waitResult struct {
	err    error
	inTime bool
}

// waitFor starts a Lock of key on l with wait budget wait, and returns its
// outcome. The lock's TTL is long, so the waiter refreshes (and retries) only
// every 20s: within the budget only a release can hand it the lock.
func waitFor(ctx context.Context, l *core.Locker, key string, wait time.Duration) <-chan waitResult {
	res := make(chan waitResult, 1)
	go func() {
		start := time.Now() // before Lock's own start: never reports a late return as in time
		s, err := l.Lock(ctx, key, core.WithWait(wait), core.WithTTL(time.Minute))
		inTime := time.Since(start) < wait
		if err == nil {
			err = s.Unlock(context.WithoutCancel(ctx))
		}
		res <- waitResult{err, inTime}
	}()
	return res
}

// waitQueued waits (bounded, 5s) until n waiters are in key's queue in
// Redis and subscribed to its channel.
func waitQueued(t *testing.T, c redis.UniversalClient, key string, n int64) {
	t.Helper()
	waitQueuedOn(t, c, "lockgate:{"+key+"}", n)
}

// waitQueuedOn is waitQueued for the lock (or semaphore) hash ch, which is
// also its channel.
func waitQueuedOn(t *testing.T, c redis.UniversalClient, ch string, n int64) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		q, _ := c.ZCard(ctx, ch+":q").Result()
		var subs map[string]int64
		if cc, ok := c.(*redis.ClusterClient); ok {
			// PUBSUB SHARDNUMSUB names no key: ask the channel's node.
			if n, err := cc.MasterForKey(ctx, ch); err == nil {
				subs, _ = n.PubSubShardNumSub(ctx, ch).Result()
			}
		} else {
			subs, _ = c.PubSubShardNumSub(ctx, ch).Result()
		}
		if q >= n && subs[ch] >= 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d waiters never queued and subscribed for %s", n, ch)
}

// checkWoken fails t unless the waiter obtained the lock before its wait
// budget ended.
func checkWoken(t *testing.T, res <-chan waitResult, name string) {
	t.Helper()
	r := <-res
	if r.err != nil {
		t.Fatalf("waiter on %s after the release: %v (timed out: %v)", name, r.err, errors.Is(r.err, core.ErrNotObtained))
	}
	if !r.inTime {
		t.Fatalf("waiter on %s obtained the lock only by its last attempt at the end of its wait budget: no release handed it over", name)
	}
}

// testWaiterWokenByRelease: a waiter queued behind a holder (other Locker,
// other client) is handed the lock by the holder's Unlock, before its 5s
// budget ends, which without the release it could not.
// Control: with no release, the same waiter ends busy.
func testWaiterWokenByRelease(t *testing.T, a, b redis.UniversalClient, key string) {
	holder, waiter := locktest.Locker(t, a), locktest.Locker(t, b)
	ctx := locktest.Context(t)

	t.Run("Released", func(t *testing.T) {
		s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		res := waitFor(ctx, waiter, key, 5*time.Second)
		waitQueued(t, a, key, 1)
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		checkWoken(t, res, key)
	})

	t.Run("ControlNotReleased", func(t *testing.T) {
		s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unlock(ctx)
		res := waitFor(ctx, waiter, key, 300*time.Millisecond)
		if r := <-res; !errors.Is(r.err, core.ErrNotObtained) {
			t.Fatalf("waiter without a release: %v, want ErrNotObtained", r.err)
		}
	})
}

// keyOnServer returns a lock name (prefix p) whose lock hash (default
// prefix) lives on a node other than not, and that node.
func keyOnServer(t *testing.T, cl *redistest.Cluster, c *redis.ClusterClient, p string, not *redistest.Server) (string, *redistest.Server) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("%s%d", p, i)
		slot, err := c.ClusterKeySlot(context.Background(), "lockgate:{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if s := cl.ServerForSlot(int(slot)); s != nil && s != not {
			return name, s
		}
	}
	t.Fatal("no name found on another node")
	return "", nil
}

// numSub returns the shard subscribers of channel on each node.
func numSub(t *testing.T, cl *redistest.Cluster, channel string) map[*redistest.Server]int64 {
	t.Helper()
	out := map[*redistest.Server]int64{}
	for _, s := range cl.Servers {
		m, err := s.Client(t).PubSubShardNumSub(context.Background(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[s] = m[channel]
	}
	return out
}

// testNotifyOnItsShard: on a Cluster a release tells its waiters on the node
// that holds the lock (SPUBLISH), where the waiting Locker's subscription is
// (SSUBSCRIBE): for two locks on two different nodes, each waiter's
// subscription is on its lock's node and nowhere else, and each release
// hands the lock over.
func testNotifyOnItsShard(t *testing.T, cl *redistest.Cluster, a, b *redis.ClusterClient) {
	holder, waiter := locktest.Locker(t, a), locktest.Locker(t, b)
	ctx := locktest.Context(t)
	first, nodeA := keyOnServer(t, cl, a, "topo:x:first", nil)
	name, nodeL := keyOnServer(t, cl, a, "topo:x:other", nodeA)
	for _, tc := range []struct {
		key  string
		node *redistest.Server
	}{{first, nodeA}, {name, nodeL}} {
		s, err := holder.Lock(ctx, tc.key, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		res := waitFor(ctx, waiter, tc.key, 5*time.Second)
		waitQueued(t, a, tc.key, 1)
		ch := "lockgate:{" + tc.key + "}"
		for srv, n := range numSub(t, cl, ch) {
			if want := int64(0); srv == tc.node && n != 1 || srv != tc.node && n != want {
				t.Fatalf("subscribers of %s on %s: %d (the lock's node is %s)", ch, srv.Addr, n, tc.node.Addr)
			}
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		checkWoken(t, res, tc.key)
	}

	// Control: the same waiter, same lock, no release: busy at the end.
	s, err := holder.Lock(ctx, name, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	if res := waitFor(ctx, waiter, name, 300*time.Millisecond); !errors.Is((<-res).err, core.ErrNotObtained) {
		t.Fatal("control: waiter without a release did not end busy")
	}
}

// testKeysShareSlot: for names with '{', '}' and '%', the keys a lock
// writes (its hash, and its slot's fence floor) map to one slot (else the
// acquire script would fail with CROSSSLOT), each lock adds one hash and
// at most one floor, and different names are different locks.
func testKeysShareSlot(t *testing.T, cl *redistest.Cluster, c *redis.ClusterClient) {
	l := locktest.Locker(t, c, core.WithPrefix("ks:"))
	ctx := locktest.Context(t)
	names := []string{"a{b", "a}b", "a%7Db", "a%257Db", "a%b", "{", "}", "%", "}{", "{}", "{a}b", "a{b}c", "%7D", "x}{y%z"}
	seen := map[string]bool{}
	for _, name := range names {
		// Every earlier lock is still held: a collision would be busy.
		if _, err := l.TryLock(ctx, name, core.WithTTL(time.Minute)); err != nil {
			t.Fatalf("TryLock %q: %v", name, err)
		}
		var hashes []string
		for _, s := range cl.Servers {
			keys, err := s.Client(t).Keys(ctx, "ks:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if !seen[k] {
					seen[k] = true
					if !strings.HasSuffix(k, ":fence") {
						hashes = append(hashes, k)
					}
				}
			}
		}
		f := core.FenceFloorKey(l, name)
		if len(hashes) != 1 || !seen[f] {
			t.Fatalf("%q: new keys %q, floor %q seen %v: want one hash and the floor", name, hashes, f, seen[f])
		}
		h := hashes[0]
		sh, err := c.ClusterKeySlot(ctx, h).Result()
		if err != nil {
			t.Fatal(err)
		}
		sf, err := c.ClusterKeySlot(ctx, f).Result()
		if err != nil {
			t.Fatal(err)
		}
		if sh != sf {
			t.Fatalf("%q: hash %q in slot %d, fence floor %q in slot %d", name, h, sh, f, sf)
		}
	}
}
