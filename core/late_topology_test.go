package core_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// lateCluster starts a 3-master Cluster with a proxy in front of each node
// and returns the proxies and a client that dials every node through its
// proxy, with go-redis's default retries and the late tests' read timeout.
func lateCluster(t *testing.T) (*redistest.Cluster, []*redistest.Proxy, *redis.ClusterClient) {
	t.Helper()
	cl := redistest.StartCluster(t, 3)
	c, ps := proxiedClusterClient(t, cl, lateReadTimeout)
	return cl, ps, c
}

// proxiedClusterClient returns a client of cl that dials every node
// through a fault proxy of its own (one per node, in cl.Addrs' order),
// with read and write timeout rt; both closed with t.
func proxiedClusterClient(t testing.TB, cl *redistest.Cluster, rt time.Duration) (*redis.ClusterClient, []*redistest.Proxy) {
	via := map[string]string{}
	var ps []*redistest.Proxy
	for _, a := range cl.Addrs {
		p := redistest.StartProxy(t, a)
		via[a], ps = p.Addr, append(ps, p)
	}
	o := cl.Options()
	o.ReadTimeout, o.WriteTimeout = rt, rt
	o.Dialer = viaProxies(via)
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	return c, ps
}

// proxyOfSlot returns the proxy of ps (proxiedClusterClient's, in cl.Addrs'
// order) in front of the master that serves slot.
func proxyOfSlot(t testing.TB, cl *redistest.Cluster, ps []*redistest.Proxy, slot int) *redistest.Proxy {
	t.Helper()
	srv := cl.ServerForSlot(slot)
	if srv == nil {
		t.Fatalf("no master serves slot %d", slot)
	}
	i := slices.Index(cl.Addrs, srv.Addr)
	if i < 0 {
		t.Fatalf("slot %d's master %s is not among the Cluster's nodes %v", slot, srv.Addr, cl.Addrs)
	}
	return ps[i]
}

// proxiedFailoverClient returns a Sentinel failover client of sen that
// dials its master through a fault proxy (the sentinels directly), with
// read and write timeout rt; both closed with t.
func proxiedFailoverClient(t testing.TB, sen *redistest.Sentinel, rt time.Duration) (*redis.Client, *redistest.Proxy) {
	p := redistest.StartProxy(t, sen.Master.Addr)
	o := sen.Options()
	o.ReadTimeout, o.WriteTimeout = rt, rt
	o.Dialer = viaProxies(map[string]string{sen.Master.Addr: p.Addr})
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { c.Close() })
	return c, p
}

// viaProxies dials each address of via through its proxy, others directly.
func viaProxies(via map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p
		}
		return d.DialContext(ctx, network, addr)
	}
}

// On a Cluster, a read lock's and a permit's acquire whose reply comes
// late (held by the proxy in front of the name's master, one per master) run again under
// the same owner and have the effect of once: one reader, one permit, the
// lease's fence in Redis. The proxies saw the script twice or more (the
// fault happened). Control: a naive counting script, sent by the same
// client with the same late reply (and sent again by the caller when the
// client does not re-send it), counts twice. A late release runs twice
// and frees only its own hold.
func TestLateRepliesOnCluster(t *testing.T) {
	t.Parallel()
	cl, ps, c := lateCluster(t)
	testLateReplies(t, c, cl.Client(t), ps)
}

// The same on Sentinel: a proxy in front of the master, found through the
// sentinels.
func TestLateRepliesOnSentinel(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	c, p := proxiedFailoverClient(t, sen, lateReadTimeout)
	testLateReplies(t, c, sen.Master.Client(t), []*redistest.Proxy{p})
}

func testLateReplies(t *testing.T, c, direct redis.UniversalClient, ps []*redistest.Proxy) {
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	for _, kind := range []string{"rlock", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			name := "late:" + kind
			var m redistest.Matcher
			var take func() (*core.Lease, error)
			var held func() int
			if kind == "rlock" {
				m = rlockScript("acquire", name)
				take = func() (*core.Lease, error) { return l.RLock(ctx, name, core.WithWait(5*time.Second)) }
				held = func() int { return readers(t, direct, name) }
			} else {
				m = semScript("acquire", name)
				take = func() (*core.Lease, error) { return l.Semaphore(ctx, name, 2, core.WithWait(5*time.Second)) }
				held = func() int { return semHolders(t, direct, name) }
			}
			var watches []*redistest.Watch
			for _, p := range ps {
				watches = append(watches, p.Watch(m))
				p.HoldReply(m, lateReply)
			}
			s, err := take()
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			for _, w := range watches {
				runs += w.Count()
			}
			if runs < 2 {
				t.Fatalf("%d acquire scripts reached Redis, want 2 or more: the fault did not happen", runs)
			}
			if n := held(); n != 1 {
				t.Fatalf("%d holds after one call whose script ran %d times, want 1", n, runs)
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n := held(); n != 0 {
				t.Fatalf("%d holds after the only Unlock", n)
			}
		})
	}
	// A release whose reply comes late runs twice and frees only its own
	// hold: the other holder (another Locker, not behind the proxy) still
	// holds.
	other := locktest.Locker(t, direct)
	for _, kind := range []string{"rlock", "semaphore"} {
		t.Run(kind+" release", func(t *testing.T) {
			name := "laterel:" + kind
			take := func(l *core.Locker, o ...core.LockOption) (*core.Lease, error) { return l.RLock(ctx, name, o...) }
			m, held := rlockScript("release", name), func() int { return readers(t, direct, name) }
			if kind == "semaphore" {
				take = func(l *core.Locker, o ...core.LockOption) (*core.Lease, error) {
					return l.Semaphore(ctx, name, 2, o...)
				}
				m, held = semScript("release", name), func() int { return semHolders(t, direct, name) }
			}
			a, err := take(l, core.WithReleaseTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			b, err := take(other)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Unlock(ctx)
			var watches []*redistest.Watch
			for _, p := range ps {
				watches = append(watches, p.Watch(m))
				p.HoldReply(m, lateReply)
			}
			if err := a.Unlock(ctx); err != nil {
				t.Fatalf("Unlock whose release came late = %v, want nil", err)
			}
			runs := 0
			for _, w := range watches {
				runs += w.Count()
			}
			if runs < 2 {
				t.Fatalf("%d release scripts reached Redis, want 2 or more: the fault did not happen", runs)
			}
			if n := held(); n != 1 {
				t.Fatalf("%d holds after one release that ran %d times, want 1 (the other's)", n, runs)
			}
		})
	}
	// A lock's lean release (one HDEL) whose reply comes late: Unlock
	// answers nil, the release script follows the HDEL, and the lock is
	// free for another owner at once.
	t.Run("lock release", func(t *testing.T) {
		const name = "laterel:lock"
		a, err := l.Lock(ctx, name, core.WithReleaseTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		hdel := redistest.MatchCommand("hdel", "lockgate:{"+name+"}")
		var holds []*redistest.Hold
		var watches []*redistest.Watch
		for _, p := range ps {
			holds = append(holds, p.HoldReply(hdel, lateReply))
			watches = append(watches, p.Watch(script(t, "release", name)))
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("Unlock whose HDEL's reply came late = %v, want nil", err)
		}
		answered, runs := 0, 0
		for i, h := range holds {
			select {
			case <-h.Answered():
				answered++
			default:
			}
			runs += watches[i].Count()
		}
		if answered != 1 || runs < 1 {
			t.Fatalf("%d HDEL answered by Redis, %d release scripts after: the fault did not happen", answered, runs)
		}
		b, err := other.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("another owner after the Unlock: %v", err)
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("control", func(t *testing.T) {
		naive := redis.NewScript(`return redis.call('HINCRBY', KEYS[1], 'held', 1)`)
		if err := naive.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		m := redistest.MatchCommand("evalsha", naive.Hash(), "naive")
		for _, p := range ps {
			p.HoldReply(m, lateReply)
		}
		if err := naive.Run(ctx, c, []string{"naive"}).Err(); err != nil {
			// not re-sent by the client (Sentinel's): sent again, as a
			// waiting caller's next attempt is
			t.Logf("the control's call: %v; sent again", err)
			naive.Run(ctx, c, []string{"naive"})
		}
		n, _ := direct.HGet(ctx, "naive", "held").Int()
		t.Logf("control: one naive acquire, %d counted", n)
		if n < 2 {
			t.Fatalf("control: a naive acquire re-sent after a late reply counted %d, want 2 or more", n)
		}
	})
}
