package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// masters starts n independent redis-servers and returns them with a
// client each.
func masters(t *testing.T, n int) ([]*redistest.Server, []redis.UniversalClient) {
	var srvs []*redistest.Server
	var cs []redis.UniversalClient
	for i := 0; i < n; i++ {
		s := redistest.Start(t)
		srvs = append(srvs, s)
		cs = append(cs, s.Client(t))
	}
	return srvs, cs
}

// redlockOn is a Redlock Locker on its own clients of srvs, closed at the
// end of the test.
func redlockOn(t *testing.T, srvs []*redistest.Server, opts ...core.Option) *core.Locker {
	t.Helper()
	var cs []redis.UniversalClient
	for _, s := range srvs {
		cs = append(cs, s.Client(t))
	}
	l, err := core.NewRedlock(cs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// redlockVia is redlockOn with some masters behind a fault proxy of their
// own: via(i, p) sets up proxy p for master i and reports whether to use it.
func redlockVia(t *testing.T, srvs []*redistest.Server, via func(i int, p *redistest.Proxy) bool, opts ...core.Option) *core.Locker {
	t.Helper()
	l, _ := redlockViaClients(t, srvs, via, opts...)
	return l
}

// redlockViaClients is redlockVia, and the Locker's clients.
func redlockViaClients(t *testing.T, srvs []*redistest.Server, via func(i int, p *redistest.Proxy) bool, opts ...core.Option) (*core.Locker, []*redis.Client) {
	t.Helper()
	var clients []redis.UniversalClient
	var plain []*redis.Client
	for i, s := range srvs {
		addr := s.Addr
		if p := redistest.StartProxy(t, s.Addr); via(i, p) {
			addr = p.Addr
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		plain = append(plain, c)
	}
	l, err := core.NewRedlock(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, plain
}

func TestNewRedlockRejects(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 3)
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srvs[0].Addr}})
	defer cluster.Close()
	for _, tc := range []struct {
		name    string
		clients []redis.UniversalClient
	}{
		{"two", cs[:2]},
		{"four", append(append([]redis.UniversalClient{}, cs...), srvs[0].Client(t))},
		{"nil", []redis.UniversalClient{cs[0], cs[1], nil}},
		{"typed nil", []redis.UniversalClient{cs[0], cs[1], (*redis.Client)(nil)}},
		{"cluster", []redis.UniversalClient{cs[0], cs[1], cluster}},
		{"same address", []redis.UniversalClient{cs[0], cs[1], srvs[0].Client(t)}},
		{"thirty-three", addressed(t, 33)},
	} {
		if _, err := core.NewRedlock(tc.clients); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: NewRedlock = %v, want ErrInvalid", tc.name, err)
		}
	}
	l, err := core.NewRedlock(cs)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// addressed is n clients of n distinct addresses where nothing listens
// (NewRedlock sends nothing).
func addressed(t *testing.T, n int) []redis.UniversalClient {
	var cs []redis.UniversalClient
	for i := range n {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// Over 3 masters: the lock is on every node while held; another Redlock
// Locker is busy; a waiter is woken by the release (long before its
// budget or any retry); re-entry through the lease's context; the next
// holder's fence is larger; Unlock frees every node.
func TestRedlockBasics(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 3)
	a, b := redlockOn(t, srvs), redlockOn(t, srvs)
	ctx := locktest.Context(t)
	s, err := a.Lock(ctx, "rl:k", core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	heldEverywhere(t, cs, "lockgate:{rl:k}") // the third node's grant may still be on its way
	if _, err := b.TryLock(ctx, "rl:k"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock of a held Redlock = %v, want ErrNotObtained", err)
	}
	inner, err := a.Lock(s.Context(), "rl:k")
	if err != nil || !inner.Reentrant() || inner.Fence() != s.Fence() {
		t.Fatalf("re-entry = %v, %v", inner, err)
	}
	inner.Unlock(ctx)
	if err := s.Extend(ctx, 2*time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if ttl, err := s.TTL(ctx); err != nil || ttl <= time.Minute {
		t.Fatalf("TTL after Extend(2m) = %v, %v; want above the first 1m", ttl, err)
	}
	got := make(chan *core.Lease, 1)
	start := time.Now()
	go func() {
		l, err := b.Lock(ctx, "rl:k", core.WithWait(10*time.Second), core.WithTTL(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitSubscribers(t, cs[0].(*redis.Client), "lockgate:{rl:k}", 1)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the waiter got the lock %v after the release: no release woke it", took)
	}
	if next.Fence() <= s.Fence() {
		t.Fatalf("next fence %d not above %d", next.Fence(), s.Fence())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Exists(ctx, "lockgate:{rl:k}").Val() != 0 {
			t.Fatalf("node %d still has the lock after Unlock", i)
		}
	}
}

// Over 5 masters, 3 Lockers × 4 goroutines increment a counter in a
// separate Redis with a non-atomic GET then SET under the lock, while two
// masters are killed mid-run: no increment is lost. Control: the same
// increments without the lock lose some.
func TestRedlockMutualExclusionWithKills(t *testing.T) {
	t.Parallel()
	srvs, _ := masters(t, 5)
	counter := redistest.Start(t).Client(t)
	ctx := locktest.Context(t)
	var ls []*core.Locker
	for i := 0; i < 3; i++ {
		ls = append(ls, redlockOn(t, srvs, core.WithTTL(2*time.Second)))
	}
	run := func(key string, locked bool, kill func()) (done int64) {
		var wg sync.WaitGroup
		var n atomic.Int64
		stop := time.Now().Add(3 * time.Second)
		for g := 0; g < 12; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					var s *core.Lease
					if locked {
						var err error
						s, err = ls[g%3].Lock(ctx, "rl:count", core.WithWait(2*time.Second))
						if err != nil {
							continue // busy, or a node being killed: try again
						}
					}
					v, _ := counter.Get(ctx, key).Int64()
					time.Sleep(100 * time.Microsecond) // the read-modify-write window
					counter.Set(ctx, key, v+1, 0)
					n.Add(1)
					if s != nil {
						s.Unlock(ctx)
					}
				}
			}()
		}
		if kill != nil {
			time.Sleep(time.Second)
			kill()
		}
		wg.Wait()
		return n.Load()
	}
	done := run("locked", true, func() { srvs[0].Stop(); srvs[1].Stop() })
	got, _ := counter.Get(ctx, "locked").Int64()
	t.Logf("locked, 2 of 5 masters killed after 1s: %d increments, counter %d", done, got)
	if done < 3 || got != done {
		t.Fatalf("under the Redlock: %d increments, counter %d (lost %d)", done, got, done-got)
	}
	undone := run("unlocked", false, nil)
	lost, _ := counter.Get(ctx, "unlocked").Int64()
	if lost >= undone {
		t.Fatalf("control: %d increments without the lock lost none (counter %d): the test cannot see a race", undone, lost)
	}
}

// 3 of 5 masters down: Lock is ErrUnavailable, joined with a *NodeError per
// node that did not answer, within its budget; never busy.
func TestRedlockQuorumDown(t *testing.T) {
	t.Parallel()
	srvs, _ := masters(t, 5)
	l := redlockOn(t, srvs)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	for _, s := range srvs[:3] {
		s.Stop()
	}
	start := time.Now()
	_, err := l.Lock(ctx, "rl:down", core.WithWait(500*time.Millisecond))
	took := time.Since(start)
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("3 of 5 down = %v, want ErrUnavailable", err)
	}
	var ne *core.NodeError
	if !errors.As(err, &ne) || ne.Node == "" {
		t.Fatalf("no *NodeError in %v", err)
	}
	if took > 500*time.Millisecond+budgetSlack {
		t.Fatalf("Lock took %v with a 500ms budget", took)
	}
}

// A node that restarts empty while a lock is held does not let a second
// owner in (the others are still a majority), and the holder's next
// renewal restores the lock there. Fences keep increasing across Lockers
// and across the restart.
func TestRedlockRestartAndFences(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 5)
	a, b := redlockOn(t, srvs), redlockOn(t, srvs)
	ctx := locktest.Context(t)
	var last int64
	next := func(l *core.Locker) *core.Lease {
		t.Helper()
		s, err := l.Lock(ctx, "rl:fence", core.WithTTL(900*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if s.Fence() <= last {
			t.Fatalf("fence %d not above the previous holder's %d", s.Fence(), last)
		}
		last = s.Fence()
		return s
	}
	for i := 0; i < 4; i++ {
		next([]*core.Locker{a, b}[i%2]).Unlock(ctx)
	}
	s := next(a)
	runID := func() string {
		_, id, _ := strings.Cut(cs[0].Info(ctx, "server").Val(), "run_id:")
		return strings.Fields(id)[0]
	}
	before := runID()
	if err := srvs[0].Restart(); err != nil {
		t.Fatal(err)
	}
	// Probe: the node restarted, empty (its lock may be restored at once:
	// the Locker's monitor renews as soon as the node answers again).
	if runID() == before {
		t.Fatal("probe: the node did not restart")
	}
	if _, err := b.TryLock(ctx, "rl:fence"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("second owner after one node restarted empty = %v, want ErrNotObtained", err)
	}
	// Restored for A's owner (b's refused TryLock may have been granted
	// on the empty node for a moment, and given back).
	owner := ownerIn(ctx, cs[1], "lockgate:{rl:fence}")
	restored := false
	for i := 0; i < 100 && !restored; i++ { // renewals every 300ms
		restored = owner != "" && ownerIn(ctx, cs[0], "lockgate:{rl:fence}") == owner
		time.Sleep(20 * time.Millisecond)
	}
	if !restored {
		t.Fatal("the holder's renewals did not restore the lock on the restarted node")
	}
	s.Unlock(ctx)
	// The restarted node lost its fence key: the majority's floor still
	// orders the next holders.
	for i := 0; i < 4; i++ {
		next([]*core.Locker{b, a}[i%2]).Unlock(ctx)
	}
}

// One master hung (SIGSTOP): Lock proceeds on the others within the
// per-node timeout (50ms, the floor), and renewals keep the lease for
// several TTL/3 rounds.
func TestRedlockHungNode(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srvs, _ := masters(t, 3)
	l := redlockOn(t, srvs)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	if err := srvs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvs[2].Resume()
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := srvs[2].Client(t).Ping(pctx).Err(); err == nil {
		t.Fatal("probe: the paused node answers")
	}
	start := time.Now()
	s, err := l.Lock(ctx, "rl:hung", core.WithTTL(time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Lock with one of 3 nodes hung: %v", err)
	}
	t.Logf("Lock with one of 3 nodes hung took %v", took)
	if took > 500*time.Millisecond {
		t.Fatalf("Lock with one node hung took %v, beyond the per-node timeout", took)
	}
	select {
	case <-s.Done():
		t.Fatalf("lease lost with one node hung: %v", context.Cause(s.Context()))
	case <-time.After(2500 * time.Millisecond): // 2.5 TTLs: renewals went on
	}
	s.Unlock(ctx)
}

// Fences from different majorities do not order by themselves: a node
// whose fence key is ahead (here set an hour ahead, as a node whose clock
// runs fast would issue) gives holder A a large fence; with that node gone,
// holder B's majority is made of the others. A's fence was made their floor
// before A's Lock returned, so B's is larger still. (Two of the five nodes
// answer 50ms late, through a proxy, so that A's majority — the first three
// to grant — is the node ahead and two prompt ones.) Control: skip-raise
// (A raises no floor, as when its majority issued one fence) leaves B's
// fence below A's.
func TestRedlockFenceFloor(t *testing.T) {
	fixedAndControl(t, "skip-raise", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs := masters(t, 5)
		lockerOn := func(opts ...core.Option) *core.Locker {
			return redlockVia(t, srvs, func(i int, p *redistest.Proxy) bool {
				if i < 3 {
					return false
				}
				p.SetLatency(50 * time.Millisecond)
				return true
			}, opts...)
		}
		a, b := lockerOn(opts...), lockerOn()
		ctx := locktest.Context(t)
		ahead := time.Now().Add(time.Hour).UnixMicro()
		if err := cs[1].Set(ctx, core.FenceFloorKey(a, "rl:floor"), ahead, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		sa, err := a.Lock(ctx, "rl:floor")
		if err != nil {
			t.Fatal(err)
		}
		if sa.Fence() <= ahead {
			t.Fatalf("probe: A's fence %d is not the node ahead's (%d): the scenario did not happen", sa.Fence(), ahead)
		}
		sa.Unlock(ctx)
		srvs[1].Stop()
		sb, err := b.Lock(ctx, "rl:floor")
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Unlock(ctx)
		if raised := sb.Fence() > sa.Fence(); raised == control {
			t.Fatalf("B's fence %d, A's %d: above = %v, want %v (control: no floor raised)", sb.Fence(), sa.Fence(), raised, !control)
		}
	})
}

// A Redlock lock's nodes issue the fence the Locker proposes (its clock
// ahead, here 95ms) when theirs are behind it, and record it as their fence
// floor: a majority that granted has issued one fence, already each one's
// floor, so Lock raises none (no fence script reaches any node), and the
// next holder's majority, which shares a node with it, issues a larger
// fence (B, with one of A's nodes gone). A node that runs the acquire more
// than 95ms late issues its own clock, which is not the scenario: the probe
// (every node's hold names one fence) then tries another name, up to 3.
// Control: proposal-unrecorded (the nodes issue the proposal but keep their
// own clock as the floor).
func TestRedlockSameFenceNeedsNoRaise(t *testing.T) {
	fixedAndControl(t, "proposal-unrecorded", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs := masters(t, 3)
		var proxies []*redistest.Proxy
		var sampled []bool
		a := redlockVia(t, srvs, func(_ int, p *redistest.Proxy) bool {
			proxies = append(proxies, p)
			return true
		}, append(opts, core.WithObserver(core.ObserverFunc(func(_ context.Context, e core.Event) {
			if e.Kind == core.EventAcquired {
				sampled = append(sampled, e.ClockSampled)
			}
		})))...)
		core.SetProposalLead(a, 95*time.Millisecond)
		b := redlockOn(t, srvs, opts...)
		ctx := locktest.Context(t)
		for try := 1; ; try++ {
			key := "rl:same:" + strconv.Itoa(try)
			var fenceCalls []*redistest.Watch
			for _, p := range proxies {
				fenceCalls = append(fenceCalls, p.Watch(script(t, "fence", key)))
			}
			sa, err := a.Lock(ctx, key) // a waiting Lock's first attempt
			if err != nil {
				t.Fatal(err)
			}
			issued := map[string]bool{}
			for _, c := range cs {
				for _, f := range c.HGetAll(ctx, "lockgate:{"+key+"}").Val() {
					issued[f] = true
				}
			}
			if len(issued) != 1 {
				sa.Unlock(ctx)
				if try == 3 {
					t.Fatalf("probe: 3 times the nodes issued different fences (%v): a node ran the acquire 95ms late", issued)
				}
				continue
			}
			for i, w := range fenceCalls {
				if n := w.Count(); n != 0 {
					t.Errorf("node %d: %d fence floor raises, want none (its majority issued one fence)", i, n)
				}
			}
			if len(sampled) != try || slices.Contains(sampled, true) {
				t.Errorf("A's acquisitions sampled the clock: %v, want none sampled (a fence proposed by the Locker)", sampled)
			}
			recorded := 0
			for _, c := range cs {
				if f, _ := c.Get(ctx, core.FenceFloorKey(a, key)).Int64(); f == sa.Fence() {
					recorded++
				}
			}
			if all := recorded == len(cs); all == control {
				t.Fatalf("%d of %d nodes have A's fence %d as their floor (control: their clocks')", recorded, len(cs), sa.Fence())
			}
			if control {
				return
			}
			if err := sa.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			srvs[0].Stop()
			sb, err := b.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Unlock(ctx)
			if sb.Fence() <= sa.Fence() {
				t.Fatalf("B's fence %d is not above A's %d", sb.Fence(), sa.Fence())
			}
			return
		}
	})
}

// A node counts a proposed fence at most 100ms ahead of its own clock, so
// no fence outlives its fence floor by more than the fence window covers:
// holder A's clock two minutes ahead, a 1s window, its floors expired after
// its release, and B (whose clock is right) still gets a larger fence.
// Control: proposal-unclamped (the nodes issue A's proposal as it is) gives
// B a fence below A's.
func TestRedlockProposalClamped(t *testing.T) {
	fixedAndControl(t, "proposal-unclamped", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs := masters(t, 3)
		opts = append(opts, core.WithFenceWindow(time.Second))
		a, b := redlockOn(t, srvs, opts...), redlockOn(t, srvs, opts...)
		core.SetProposalLead(a, 2*time.Minute)
		ctx := locktest.Context(t)
		// Each node announces a key's expiry (keyevent "expired"), subscribed
		// before A's fence floors are written.
		floor := core.FenceFloorKey(a, "rl:clamp")
		expired := make([]*redis.PubSub, len(cs))
		for i, c := range cs {
			if err := c.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
				t.Fatal(err)
			}
			expired[i] = c.Subscribe(ctx, "__keyevent@0__:expired")
			defer expired[i].Close()
			if _, err := expired[i].Receive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		sa, err := a.TryLock(ctx, "rl:clamp")
		if err != nil {
			t.Fatal(err)
		}
		if err := sa.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		gone, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for i, ps := range expired {
			// A node whose acquire came after the release (which left a done
			// marker there) wrote no floor; one that did announces its expiry.
			if cs[i].Exists(ctx, floor).Val() == 0 {
				continue
			}
			for {
				m, err := ps.ReceiveMessage(gone)
				if err != nil {
					t.Fatalf("node %d: fence floor not expired 5s after a 1s window: %v", i, err)
				}
				if m.Payload == floor {
					break
				}
			}
		}
		sb, err := b.TryLock(ctx, "rl:clamp")
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Unlock(ctx)
		if above := sb.Fence() > sa.Fence(); above == control {
			t.Fatalf("B's fence %d, A's %d: above = %v, want %v (control: A's proposal issued two minutes ahead)", sb.Fence(), sa.Fence(), above, !control)
		}
	})
}

// A lease whose majority is gone is lost: with 2 of 3 masters killed, the
// renewals fail and the lease's context is cancelled with ErrLockLost
// before its validity could pass. Control: with one of 3 killed, the lease
// is kept.
func TestRedlockLosesWithoutMajority(t *testing.T) {
	t.Parallel()
	for _, killed := range []int{1, 2} {
		t.Run(strconv.Itoa(killed)+" of 3 killed", func(t *testing.T) {
			srvs, _ := masters(t, 3)
			l := redlockOn(t, srvs)
			ctx := locktest.Context(t)
			const ttl = time.Second // renewals every 333ms: room for a loaded machine
			s, err := l.Lock(ctx, "rl:lose", core.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unlock(ctx)
			for _, srv := range srvs[:killed] {
				srv.Stop()
			}
			select {
			case <-s.Done():
				if killed == 1 {
					t.Fatalf("lease lost with a majority alive: %v", context.Cause(s.Context()))
				}
				if !errors.Is(context.Cause(s.Context()), core.ErrLockLost) {
					t.Fatalf("lease ended with %v, want ErrLockLost", context.Cause(s.Context()))
				}
			case <-time.After(3 * ttl):
				if killed == 2 {
					t.Fatal("lease still live 3 TTLs after its majority was killed")
				}
			}
		})
	}
}

// A short lease is obtained on a majority while one master hangs: an
// acquire returns as soon as a majority granted, so the two healthy
// masters' grants arrive with validity left (before, a 50ms lock waited out
// the hung master's 50ms timeout and was always late: ErrUnavailable,
// though a majority answered; the fault rig found it).
// Control: with two masters hung there is no majority: unavailable. It
// runs alone: a 50ms lease beside seven other tests under the race
// detector was once lost 14ms after it was taken, a scheduling stall.
func TestRedlockShortLeaseWithOneHungMaster(t *testing.T) {
	srvs, _ := masters(t, 3)
	l := redlockOn(t, srvs)
	ctx := locktest.Context(t)
	warmRedlock := func() {
		s, err := l.Lock(ctx, "warm")
		if err != nil {
			t.Fatal(err)
		}
		s.Unlock(ctx)
	}
	warmRedlock()
	if err := srvs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvs[2].Resume()
	for i := range 5 {
		s, err := l.Lock(ctx, "short:"+strconv.Itoa(i), core.WithTTL(50*time.Millisecond), core.WithoutWatchdog())
		if err != nil {
			t.Fatalf("a 50ms lock with one of three masters hung = %v, want it from the other two", err)
		}
		// A renewal returns on the two that hold it too: waiting out the
		// hung master's per-node timeout (50ms) spent the whole validity.
		if err := s.Extend(ctx, 50*time.Millisecond); err != nil {
			t.Fatalf("extend of a 50ms lock with one master hung = %v", err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatalf("unlock after the extend = %v, want the lease still valid", err)
		}
	}
	if err := srvs[1].Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvs[1].Resume()
	if _, err := l.Lock(ctx, "short:control", core.WithTTL(50*time.Millisecond), core.WithWait(200*time.Millisecond)); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("control: with two of three masters hung = %v, want ErrUnavailable", err)
	}
}

// Redlock's waiters of one Locker take turns, in the order they came: 8
// goroutines wait behind another Locker's holder and get the lock one after
// another in arrival order once it is released. Before, all of them tried
// at every release (after a random delay, so as not to split the masters
// every time) and won in any order; under contention some waited past
// their budgets (make bench). Control: that put back, the order is another.
func TestRedlockWaitersTakeTurns(t *testing.T) {
	t.Parallel()
	srvs, _ := masters(t, 3)
	holder := redlockOn(t, srvs)
	for _, mutant := range []string{"", "no-turns"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			var events locktest.Events
			l := redlockOn(t, srvs, core.WithMutants(mutant), core.WithObserver(&events))
			ctx := locktest.Context(t)
			key := "turns:" + mutant
			s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := l.Lock(ctx, key, core.WithWait(10*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					w.Unlock(ctx)
				}()
				// Arrival order: each call waits before the next starts.
				waiting := 0
				if _, ok := events.Wait(ctx, func(e core.Event) bool {
					if e.Kind == core.EventWaiting && e.Key == key {
						waiting++
					}
					return waiting == i+1
				}); !ok {
					t.Fatalf("waiter %d never waited", i)
				}
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			inOrder := slices.IsSorted(order)
			if mutant != "" {
				if inOrder {
					t.Fatalf("control: without turns the %d waiters still came in arrival order %v", n, order)
				}
				return
			}
			if !inOrder {
				t.Fatalf("acquisition order %v, want the arrival order", order)
			}
		})
	}
}

// An acquire decided on exactly a quorum of grants (the third master held by
// another owner) does not fail when one of the granting masters is slow to
// confirm the fence floor: any quorum of masters may carry it, the busy one
// too. Before, only the granting masters were asked, so the slow one made a
// healthy majority answer ErrUnavailable. Control: the busy master slow to
// confirm as well leaves one confirmation, too few.
func TestRedlockFenceFloorOnAnyQuorum(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 3)
	ctx := locktest.Context(t)
	for _, control := range []bool{false, true} {
		key := "quorum:" + strconv.FormatBool(control)
		// The third master: held by another owner, so it answers busy.
		if err := cs[2].HSet(ctx, "lockgate:{"+key+"}", "owner", "someone-else", "fence", 1).Err(); err != nil {
			t.Fatal(err)
		}
		cs[2].PExpire(ctx, "lockgate:{"+key+"}", time.Minute)
		l := redlockVia(t, srvs, func(i int, p *redistest.Proxy) bool {
			if i == 1 || i == 2 && control {
				p.HoldReply(script(t, "fence", key), 600*time.Millisecond)
				return true
			}
			return false
		})
		// The first master's fence floor is ahead, so the two granting
		// masters issue different fences and the floors must be raised.
		ahead := time.Now().Add(time.Hour).UnixMicro()
		if err := cs[0].Set(ctx, core.FenceFloorKey(l, key), ahead, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		// One attempt; the TTL's per-node timeout (200ms) leaves a loaded
		// machine room to answer the acquire, not the held fence.
		s, err := l.TryLock(ctx, key, core.WithTTL(20*time.Second))
		switch {
		case control && !errors.Is(err, core.ErrUnavailable):
			t.Fatalf("control: two of three masters slow to confirm the fence = %v, want ErrUnavailable", err)
		case control:
		case err != nil:
			t.Fatalf("granted by two masters, one slow to confirm the fence = %v, want the lock", err)
		case s.Fence() <= ahead:
			t.Fatalf("probe: fence %d is not the first master's (%d): no raise was needed", s.Fence(), ahead)
		default:
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A majority's busy answers decide a Redlock attempt: a TryLock on a lock
// another owner holds returns busy without waiting for a hung node's
// answer (up to the per-node timeout, 1s for a 100s TTL), so that an
// attempt late in a waiter's budget is answered by the nodes that answer.
// Control: with a second node's replies 2s late, no majority answers in
// time; the attempt then waits the per-node timeout and ends unavailable,
// naming the nodes.
func TestRedlockBusyMajorityDecides(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srvs, cs := masters(t, 3)
	holder := redlockOn(t, srvs)
	proxies := make([]*redistest.Proxy, 3)
	l := redlockVia(t, srvs, func(i int, p *redistest.Proxy) bool { proxies[i] = p; return i > 0 })
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	const ttl = 100 * time.Second
	s, err := holder.Lock(ctx, "rl:busy", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	heldEverywhere(t, cs, "lockgate:{rl:busy}")
	proxies[2].Stall()
	defer proxies[2].Unstall()
	try := func() (time.Duration, error) {
		start := time.Now()
		s, err := l.TryLock(ctx, "rl:busy", core.WithTTL(ttl), core.WithAttemptTimeout(5*time.Second))
		if s != nil {
			t.Fatal("obtained a lock another owner holds")
		}
		return time.Since(start), err
	}
	took, err := try()
	if !errors.Is(err, core.ErrNotObtained) || errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("TryLock with two nodes busy and one hung: %v, want busy", err)
	}
	if took >= 500*time.Millisecond {
		t.Fatalf("TryLock took %v: it waited for the hung node (per-node timeout 1s)", took)
	}
	proxies[1].SetLatency(2 * time.Second)
	took, err = try()
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("control: one node answering in time: %v, want unavailable", err)
	}
	if took < time.Second {
		t.Fatalf("control: the attempt took %v, less than the per-node timeout", took)
	}
	proxies[1].SetLatency(0)
}

// A TryLock that a majority answered busy gives back what a slower node
// grants it afterwards, as redsync's failed acquire releases every node:
// the lock's holder lost its copy on node 2 (deleted here), whose replies
// to the TryLock's Locker come 300ms late; nodes 0 and 1 answer busy at
// once, and node 2's late grant is released soon after, not kept to its
// 100s TTL. Control: with the give-back taken out (the keep-straggler
// mutant), node 2 still names the TryLock's owner a second later.
//
// A round in which node 2 never grants proves nothing and is run again (3
// rounds at most): on a loaded machine the give-back can reach node 2
// before the TryLock's own acquire does (its goroutine not yet run), and
// the give-back's done marker then makes the acquire a no-op, as it should
// (seen once in a clean-clone run).
func TestRedlockBusyGivesBackStraggler(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srvs, cs := masters(t, 3)
	holder := redlockOn(t, srvs)
	for _, mutant := range []string{"", "keep-straggler"} {
		var slow *redistest.Proxy
		l, lcs := redlockViaClients(t, srvs, func(i int, p *redistest.Proxy) bool { slow = p; return i == 2 }, core.WithMutants(mutant))
		locktest.Warm(t, l)
		// The give-back is the release script, which the warm-up's lean
		// release did not load: loaded now, since a NOSCRIPT answer from
		// the slow node would come too late for the EVAL to follow in time.
		src, err := core.ScriptSource("release")
		if err != nil {
			t.Fatal(err)
		}
		if err := lcs[2].ScriptLoad(locktest.Context(t), src).Err(); err != nil {
			t.Fatal(err)
		}
		// It goes on a second connection while the acquire's reply is held
		// back: one opened now, since opening one then waits for the slow
		// node's handshake replies too.
		pooled(t, lcs[2], 2)
		var granted, gone time.Duration
		for round := 1; round <= 3; round++ {
			granted, gone = straggle(t, holder, l, slow, cs, mutant)
			if granted != 0 {
				break
			}
			t.Logf("%q, round %d: node 2 never granted the TryLock's owner", mutant, round)
		}
		switch {
		case mutant == "" && (granted == 0 || gone == 0):
			t.Fatalf("the slow node's grant: seen after %v, given back after %v (0: never within 3s)", granted, gone)
		case mutant != "" && granted == 0:
			t.Fatal("control: the slow node never granted the TryLock's owner")
		case mutant != "" && gone != 0:
			t.Fatalf("control: the slow node's grant went after %v without the give-back", gone)
		}
		t.Logf("%q: slow node granted after %v, given back after %v", mutant, granted, gone)
	}
}

// keyspaceEvents subscribes to c's keyspace events of key's generic and
// hash commands (HSET, DEL, ...) and its expiry, closed at the end of the
// test.
func keyspaceEvents(t *testing.T, c redis.UniversalClient, key string) <-chan *redis.Message {
	t.Helper()
	ctx := locktest.Context(t)
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "Kghx").Err(); err != nil {
		t.Fatal(err)
	}
	ps := c.Subscribe(ctx, "__keyspace@0__:"+key)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return ps.Channel()
}

// pooled leaves n open connections idle in c's pool.
func pooled(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	ctx := locktest.Context(t)
	conns := make([]*redis.Conn, n)
	for i := range conns {
		conns[i] = c.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cn := range conns {
		cn.Close()
	}
	if idle := c.PoolStats().IdleConns; idle < uint32(n) {
		t.Fatalf("%d idle connections, want %d", idle, n)
	}
}

// straggle is one round of TestRedlockBusyGivesBackStraggler: how long
// after the TryLock node 2 named its owner, and how long until it named
// none (0: not within 3s).
func straggle(t *testing.T, holder, l *core.Locker, slow *redistest.Proxy, cs []redis.UniversalClient, mutant string) (granted, gone time.Duration) {
	t.Helper()
	ctx := locktest.Context(t)
	const key, hash, ttl = "rl:straggle", "lockgate:{rl:straggle}", 100 * time.Second
	s, err := holder.Lock(ctx, key, core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	holderOwner := heldEverywhere(t, cs, hash)
	cs[2].Del(ctx, hash)
	// Node 2's changes to the lock, as they happen: the grant's HSET, the
	// give-back's DEL (a few ms apart; polling missed them once).
	events := keyspaceEvents(t, cs[2], hash)
	slow.SetLatency(300 * time.Millisecond)
	start := time.Now()
	if _, err := l.TryLock(ctx, key, core.WithTTL(ttl), core.WithAttemptTimeout(5*time.Second)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("%q: TryLock with two nodes busy = %v, want busy", mutant, err)
	}
	if took := time.Since(start); took >= 300*time.Millisecond {
		t.Fatalf("%q: TryLock took %v: it waited for the slow node", mutant, took)
	}
	// Node 2's grant to the TryLock's owner shows, then is given back.
	timeout := time.After(3 * time.Second)
watch:
	for gone == 0 {
		select {
		case m := <-events:
			switch {
			case m.Payload == "hset" && granted == 0:
				if owner := ownerIn(ctx, cs[2], hash); owner == holderOwner {
					t.Fatalf("node 2 names the holder again")
				}
				granted = time.Since(start)
			case m.Payload == "del" && granted > 0:
				gone = time.Since(start)
			}
		case <-timeout:
			break watch
		}
	}
	slow.SetLatency(0)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	cs[2].Del(ctx, hash)
	return granted, gone
}

// heldEverywhere waits until every node names one owner of the lock hash
// (a Redlock Lock returns once a quorum granted: the last node's grant may
// still be on its way) and returns it.
func heldEverywhere(t *testing.T, cs []redis.UniversalClient, hash string) string {
	t.Helper()
	ctx := locktest.Context(t)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		owner := ownerIn(ctx, cs[0], hash)
		same := owner != ""
		for _, c := range cs[1:] {
			same = same && ownerIn(ctx, c, hash) == owner
		}
		if same {
			return owner
		}
		time.Sleep(2 * time.Millisecond) // polling Redis: nothing signals a key's change
	}
	t.Fatalf("%s: the nodes do not all name one owner within 2s", hash)
	return ""
}

// A Redlock attempt that splits the nodes (one grant, two busy) tells the
// holder's remaining TTL, as a busy answer does: the busy nodes' holder has
// most of its TTL left, and the TryLock's BusyError says so (it said a
// random 1–11ms, the delay before a waiter's next attempt). The holder holds
// nodes 0 and 2 (its copy on node 1 deleted here); the TryLock's Locker sees
// their replies 50ms late, so node 1's grant comes first and every node
// answers. Control: with the holder's TTL at 2s instead of 30s, the
// HolderTTL follows it.
func TestRedlockSplitTellsHolderTTL(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 3)
	holder := redlockOn(t, srvs)
	proxies := make([]*redistest.Proxy, 3)
	l := redlockVia(t, srvs, func(i int, p *redistest.Proxy) bool { proxies[i] = p; return i != 1 })
	locktest.Warm(t, l)
	ctx := locktest.Context(t)
	for _, ttl := range []time.Duration{30 * time.Second, 2 * time.Second} {
		s, err := holder.Lock(ctx, "rl:split", core.WithTTL(ttl), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		heldEverywhere(t, cs, "lockgate:{rl:split}")
		cs[1].Del(ctx, "lockgate:{rl:split}")
		proxies[0].SetLatency(50 * time.Millisecond)
		proxies[2].SetLatency(50 * time.Millisecond)
		_, err = l.TryLock(ctx, "rl:split", core.WithAttemptTimeout(5*time.Second))
		proxies[0].SetLatency(0)
		proxies[2].SetLatency(0)
		var busy *core.BusyError
		if !errors.As(err, &busy) {
			t.Fatalf("TryLock on a split: %v, want busy", err)
		}
		if busy.HolderTTL < ttl-time.Second || busy.HolderTTL > ttl {
			t.Fatalf("holder's TTL %v: BusyError.HolderTTL %v", ttl, busy.HolderTTL)
		}
		if owner := ownerIn(ctx, cs[1], "lockgate:{rl:split}"); owner != "" {
			// the split's grant is given back at once (the undo runs in
			// the background: wait for it, bounded)
			for deadline := time.Now().Add(2 * time.Second); owner != "" && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond) // polling Redis: nothing signals a key's change
				owner = ownerIn(ctx, cs[1], "lockgate:{rl:split}")
			}
			if owner != "" {
				t.Fatal("the split's grant on node 1 was not given back")
			}
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A Redlock waiter that a majority answers busy while one node grants it
// (the holder's copy there is gone: deleted here, as a restart would) gives
// that grant back and waits for the holder's release, as after any busy
// answer: it does not retry every few milliseconds, each time taking and
// giving back the node, while the holder holds. Its Lock makes a handful of
// attempts over the holder's 300ms. Control: taken for a split (the mutant
// retry-stray), it tries again after a random 1–11ms, dozens of times.
func TestRedlockStrayGrantWaits(t *testing.T) {
	// Alone, not side by side: its control counts attempts in 300ms (see
	// TestMain); beside seven other tests it once made only 5.
	srvs, cs := masters(t, 3)
	holder := redlockOn(t, srvs)
	ctx := locktest.Context(t)
	for _, mutant := range []string{"", "retry-stray"} {
		attempts := make(chan int, 1)
		obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
			if e.Kind == core.EventAcquired && e.Key == "rl:stray" {
				attempts <- e.Attempts
			}
		})
		l := redlockOn(t, srvs, core.WithObserver(obs), core.WithMutants(mutant))
		locktest.Warm(t, l)
		s, err := holder.Lock(ctx, "rl:stray", core.WithTTL(10*time.Second), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		heldEverywhere(t, cs, "lockgate:{rl:stray}")
		cs[2].Del(ctx, "lockgate:{rl:stray}")
		release := time.AfterFunc(300*time.Millisecond, func() { s.Unlock(context.Background()) })
		w, err := l.Lock(ctx, "rl:stray", core.WithWait(5*time.Second))
		release.Stop()
		if err != nil {
			t.Fatalf("%q: %v", mutant, err)
		}
		n := <-attempts
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%q: obtained after the holder's release in %d attempts", mutant, n)
		switch {
		case mutant == "" && n > 5:
			t.Fatalf("the waiter made %d attempts while the holder held 300ms: it retried instead of waiting", n)
		case mutant != "" && n <= 5:
			t.Fatalf("control: a waiter retrying every 1–11ms made only %d attempts in 300ms", n)
		}
	}
}

// A Redlock Locker's first lock does not wait for the server check of its
// first node: with that node down (its port refusing), a fresh Locker's
// first Lock with a 300ms budget is granted by the other two, in time.
// Control: with the check on the caller's goroutine (the check-inline
// mutant) the refused node's dial retries spend the budget, and the Lock
// ends unavailable with no attempt made.
func TestRedlockFirstLockWithFirstNodeDown(t *testing.T) {
	t.Parallel()
	srvs, _ := masters(t, 3)
	srvs[0].Stop()
	ctx := locktest.Context(t)
	for _, mutant := range []string{"", "check-inline"} {
		var cs []redis.UniversalClient
		for _, s := range srvs {
			c := redis.NewClient(&redis.Options{Addr: s.Addr})
			t.Cleanup(func() { c.Close() })
			cs = append(cs, c)
		}
		l, err := core.NewRedlock(cs, core.WithMutants(mutant))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s, err := l.Lock(ctx, "rl:first:"+mutant, core.WithWait(300*time.Millisecond), core.WithTTL(time.Second))
		took := time.Since(start)
		if s != nil {
			s.Unlock(ctx)
		}
		l.Close()
		t.Logf("%q: %v after %v", mutant, err, took)
		switch {
		case mutant == "" && err != nil:
			t.Fatalf("first Lock with node 0 down and two up: %v after %v", err, took)
		case mutant != "" && !errors.Is(err, core.ErrUnavailable):
			t.Fatalf("control: the check on the caller's goroutine: %v after %v, want unavailable", err, took)
		}
	}
}

// A Redlock lease's TTL is what a quorum still holds: with the lock at 10s,
// 20s and 1m on the three nodes, 20s (not the shortest, not the longest);
// gone from one node and at 20s on another, 20s; gone from two of three,
// ErrNotHeld. Each answer differs from what the shortest, the longest or
// any single node's TTL would give.
func TestRedlockTTLIsAQuorums(t *testing.T) {
	t.Parallel()
	srvs, cs := masters(t, 3)
	l := redlockOn(t, srvs)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "rl:ttl", core.WithTTL(time.Minute), core.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	key := "lockgate:{rl:ttl}"
	heldEverywhere(t, cs, key)
	for i, d := range []time.Duration{10 * time.Second, 20 * time.Second} { // the third keeps its minute
		if err := cs[i].PExpire(ctx, key, d).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, err := s.TTL(ctx); err != nil || ttl > 20*time.Second || ttl < 15*time.Second {
		t.Fatalf("TTL with the lock at 10s, 20s and 1m on the three nodes = %v, %v; want about 20s (two hold it that long)", ttl, err)
	}
	if err := cs[0].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cs[1].PExpire(ctx, key, 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, err := s.TTL(ctx); err != nil || ttl > 20*time.Second || ttl < 10*time.Second {
		t.Fatalf("TTL with the lock gone from one node and at 20s on another = %v, %v; want about 20s", ttl, err)
	}
	if err := cs[1].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, err := s.TTL(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("TTL with the lock on one node of three = %v, %v; want ErrNotHeld", ttl, err)
	}
}

// A Redlock release sends each node the lean hold's HDEL and leaves no done
// marker once every node's acquire has answered (nodes 0 and 1 answer
// 100ms late, node 2 at once; the test waits for all three). While a node's
// acquire is unanswered (node 2's reply held back), the release leaves the
// owner's done marker on that node, which stops that acquire should a copy
// of it still arrive, and sends the others the lean HDEL. Control:
// blind-release leaves no marker.
func TestRedlockReleaseMarksUnseenAcquires(t *testing.T) {
	fixedAndControl(t, "blind-release", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs := masters(t, 3)
		var proxies []*redistest.Proxy
		l := redlockVia(t, srvs, func(_ int, p *redistest.Proxy) bool { proxies = append(proxies, p); return true }, opts...)
		locktest.Warm(t, l)
		ctx := locktest.Context(t)
		markers := func(key string) (n int) {
			for _, c := range cs {
				n += len(c.Keys(ctx, "lockgate:{"+key+"}:done:*").Val())
			}
			return n
		}

		late := []*redistest.Hold{
			proxies[0].HoldReply(redistest.MatchCommand("evalsha", "lockgate:{rl:answered}"), 100*time.Millisecond),
			proxies[1].HoldReply(redistest.MatchCommand("evalsha", "lockgate:{rl:answered}"), 100*time.Millisecond),
		}
		s, err := l.TryLock(ctx, "rl:answered")
		if err != nil {
			t.Fatal(err)
		}
		// The majority decided on the second answer; the third is on its
		// way (written to the client), and its node's call counts it
		// within moments: no event tells when, so the test yields meanwhile.
		for _, h := range late {
			within(t, h.Released(), time.Second, "a late acquire reply")
		}
		for end := time.Now().Add(2 * time.Second); core.Marked(s); runtime.Gosched() {
			if time.Now().After(end) {
				t.Fatal("every acquire reply was written 2s ago, and the hold still counts one unanswered")
			}
		}
		var hdels []*redistest.Watch
		for _, p := range proxies {
			hdels = append(hdels, p.Watch(redistest.MatchCommand("hdel", "lockgate:{rl:answered}")))
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i, w := range hdels {
			if n := w.Count(); n != 1 {
				t.Errorf("node %d: %d HDELs of the lean hold, want 1", i, n)
			}
		}
		if n := markers("rl:answered"); n != 0 {
			t.Errorf("every node's acquire answered, yet the release left %d done markers", n)
		}

		held := proxies[2].HoldReply(redistest.MatchCommand("evalsha", "lockgate:{rl:unseen}"), 2*time.Second)
		s, err = l.TryLock(ctx, "rl:unseen")
		if err != nil {
			t.Fatal(err)
		}
		within(t, held.Matched(), time.Second, "node 2's acquire")
		hdels = hdels[:0]
		for _, p := range proxies[:2] {
			hdels = append(hdels, p.Watch(redistest.MatchCommand("hdel", "lockgate:{rl:unseen}")))
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The marker that stops a late copy of node 2's acquire is node 2's;
		// nodes 0 and 1, whose acquire answered, get the lean HDEL.
		if n := len(cs[2].Keys(ctx, "lockgate:{rl:unseen}:done:*").Val()); (n == 1) == control {
			t.Fatalf("node 2's acquire unanswered: %d done markers on node 2 after the release, want 1: %v", n, !control)
		}
		for i, w := range hdels {
			if n, m := w.Count(), len(cs[i].Keys(ctx, "lockgate:{rl:unseen}:done:*").Val()); n != 1 || m != 0 {
				t.Errorf("node %d, whose acquire answered: %d HDELs of the lean hold and %d done markers, want 1 and none", i, n, m)
			}
		}
	})
}

// A renewal's re-take of a node that lost the hold (node 2, emptied) and
// then hangs (the re-take's reply held back 5s) is bounded by the per-node
// timeout, so the renewal, which a quorum answered, keeps the lease; and
// since the re-take may still run, the release leaves the owner's done
// markers instead of the lean HDEL — after the watchdog's renewal, and after
// an Extend's. Controls: unbounded-retake (the re-take waits for the
// client's own timeouts) loses the lease; blind-release leaves no markers.
func TestRedlockUnansweredRetake(t *testing.T) {
	t.Run("lease", func(t *testing.T) {
		fixedAndControl(t, "unbounded-retake", func(t *testing.T, control bool, opts []core.Option) {
			if _, err := unansweredRetake(t, opts, false); (err == nil) == control {
				t.Fatalf("Unlock after a hung re-take: %v (control: lost)", err)
			}
		})
	})
	for _, extend := range []bool{false, true} {
		t.Run(map[bool]string{false: "markers", true: "extend-markers"}[extend], func(t *testing.T) {
			fixedAndControl(t, "blind-release", func(t *testing.T, control bool, opts []core.Option) {
				n, err := unansweredRetake(t, opts, extend)
				if err != nil {
					t.Fatal(err)
				}
				if (n == 2) == control {
					t.Fatalf("a re-take unanswered: %d done markers on nodes 0 and 1 after the release, want 2: %v", n, !control)
				}
			})
		})
	}
}

// unansweredRetake is TestRedlockUnansweredRetake's scenario, the re-take
// made by the watchdog or (extend) by an Extend of a lease the watchdog
// does not renew: the done markers on nodes 0 and 1 after Unlock, and
// Unlock's error.
func unansweredRetake(t *testing.T, opts []core.Option, extend bool) (int, error) {
	srvs, cs := masters(t, 3)
	var proxies []*redistest.Proxy
	var events locktest.Events
	opts = append(opts, core.WithObserver(&events))
	ttl := time.Second
	if extend {
		// A renewal's nodes get TTL/4, Extend its attempt timeout: room for
		// nodes 0 and 1 to answer 300ms late.
		ttl = 4 * time.Second
		opts = append(opts, core.WithAttemptTimeout(3*time.Second))
	}
	l := redlockVia(t, srvs, func(_ int, p *redistest.Proxy) bool { proxies = append(proxies, p); return true }, opts...)
	locktest.Warm(t, l)
	ctx := locktest.Context(t)
	const key, hash = "rl:retake", "lockgate:{rl:retake}"
	lockOpts := []core.LockOption{core.WithTTL(ttl)}
	if extend {
		lockOpts = append(lockOpts, core.WithoutWatchdog())
	}
	s, err := l.Lock(ctx, key, lockOpts...)
	if err != nil {
		t.Fatal(err)
	}
	// Node 2's acquire has run (it may answer after Lock returned), so the
	// hold below takes the re-take, not that acquire.
	heldEverywhere(t, cs, hash)
	retake := proxies[2].HoldReply(script(t, "acquire", key), 5*time.Second)
	if err := cs[2].Del(ctx, hash).Err(); err != nil {
		t.Fatal(err)
	}
	if extend {
		// Nodes 0 and 1 answer the renewal 300ms late, so node 2's "not
		// held" is read before a quorum decides it, and the re-take follows.
		for _, p := range proxies[:2] {
			p.HoldReply(script(t, "renew", key), 300*time.Millisecond)
		}
		if err := s.Extend(ctx, ttl); err != nil {
			t.Fatalf("Extend, held on nodes 0 and 1: %v", err)
		}
		within(t, retake.Matched(), time.Second, "the Extend's re-take of node 2")
		return releaseMarkers(t, ctx, s, cs, hash)
	}
	within(t, retake.Matched(), 3*time.Second, "the renewal's re-take of node 2")
	renewals := 0
	for _, e := range events.All() {
		if e.Kind == core.EventRenewed && e.Key == key {
			renewals++
		}
	}
	// The renewal that sent the re-take ends once the re-take does (or the
	// lease is lost).
	seen := 0
	if _, ok := events.Wait(ctx, func(e core.Event) bool {
		if e.Kind == core.EventRenewed && e.Key == key {
			seen++
		}
		return seen > renewals || e.Kind == core.EventLost
	}); !ok {
		t.Fatal("no renewal after the re-take")
	}
	return releaseMarkers(t, ctx, s, cs, hash)
}

// releaseMarkers unlocks s: the done markers then on nodes 0 and 1, and Unlock's error.
func releaseMarkers(t *testing.T, ctx context.Context, s *core.Lease, cs []redis.UniversalClient, hash string) (int, error) {
	t.Helper()
	err := s.Unlock(ctx)
	n := 0
	for _, c := range cs[:2] {
		n += len(c.Keys(ctx, hash+":done:*").Val())
	}
	return n, err
}

// A Redlock attempt that fails after a node ran it is undone, even when
// the other nodes' dials were refused (a refused dial alone means the call
// never ran): nodes 0 and 2 are stopped, their clients dial once, node 1
// grants, and TryLock's failure gives node 1's grant back at once, not at
// its TTL. Control: dial-never-ran keeps it.
func TestRedlockFailureAfterAGrantIsUndone(t *testing.T) {
	fixedAndControl(t, "dial-never-ran", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs, l := dialOnceRedlock(t, opts)
		ctx := locktest.Context(t)
		const hash = "lockgate:{rl:dial}"
		events := keyspaceEvents(t, cs[1], hash)
		srvs[0].Stop()
		srvs[2].Stop()
		_, err := l.TryLock(ctx, "rl:dial", core.WithTTL(100*time.Second), core.WithAttemptTimeout(10*time.Second))
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("TryLock with 2 of 3 nodes down: %v, want unavailable", err)
		}
		var dial *net.OpError
		if !errors.As(err, &dial) || dial.Op != "dial" {
			t.Fatalf("TryLock's error names no refused dial (the fault did not happen): %v", err)
		}
		granted, gone := false, false
		timeout := time.After(2 * time.Second)
	watch:
		for !gone {
			select {
			case m := <-events:
				granted = granted || m.Payload == "hset"
				gone = granted && m.Payload == "del"
			case <-timeout:
				break watch
			}
		}
		if !granted {
			t.Fatal("node 1 never granted (the fault did not happen)")
		}
		if gone == control {
			t.Fatalf("node 1's grant given back: %v, want %v", gone, !control)
		}
	})
}

// dialOnceRedlock is a Redlock Locker over 3 masters whose clients dial
// once (a stopped node's failure is its refused dial), the masters, and a
// client of each.
func dialOnceRedlock(t *testing.T, opts []core.Option) ([]*redistest.Server, []redis.UniversalClient, *core.Locker) {
	t.Helper()
	srvs, cs := masters(t, 3)
	var clients []redis.UniversalClient
	for _, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, DialerRetries: 1})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	l, err := core.NewRedlock(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return srvs, cs, l
}

// A Redlock renewal that fails after it ran on a node is given back once the
// lease is lost, even when the other nodes' dials were refused: node 1
// renews, nodes 0 and 2 are stopped and their clients dial once, and the
// loss deletes node 1's hold at once instead of leaving it to expire.
// Control: dial-never-ran counts the failed renewal as never run, and node
// 1's hold expires on its own.
func TestRedlockFailedRenewalThatRanIsGivenBack(t *testing.T) {
	fixedAndControl(t, "dial-never-ran", func(t *testing.T, control bool, opts []core.Option) {
		srvs, cs, l := dialOnceRedlock(t, opts)
		ctx := locktest.Context(t)
		const hash = "lockgate:{rl:renewdial}"
		s, err := l.Lock(ctx, "rl:renewdial", core.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		events := keyspaceEvents(t, cs[1], hash)
		srvs[0].Stop()
		srvs[2].Stop()
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the lease outlived two of three nodes")
		}
		renewed, deleted, expired := false, false, false
		timeout := time.After(5 * time.Second)
	watch:
		for !deleted && !expired {
			select {
			case m := <-events:
				renewed = renewed || m.Payload == "expire"
				deleted = m.Payload == "del"
				expired = m.Payload == "expired"
			case <-timeout:
				break watch
			}
		}
		if !renewed {
			t.Fatal("node 1 never renewed after the stop (the fault did not happen)")
		}
		if !deleted && !expired {
			t.Fatal("node 1's hold neither deleted nor expired within 5s")
		}
		if deleted == control {
			t.Fatalf("node 1's hold given back on loss: %v, want %v", deleted, !control)
		}
	})
}
