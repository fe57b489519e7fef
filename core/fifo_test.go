package core_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// queueLen is the number of waiters in key's queue in Redis.
func queueLen(c redis.UniversalClient, key string) int64 {
	return c.ZCard(context.Background(), "lockgate:{"+key+"}:q").Val()
}

// waitQueueLen waits (bounded, 5s) until key's queue has n waiters.
func waitQueueLen(t *testing.T, c redis.UniversalClient, key string, n int64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if queueLen(c, key) == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("queue of %s never reached %d waiters (has %d)", key, n, queueLen(c, key))
}

// Waiters of three Lockers get the lock in the order they joined its queue:
// the release hands it to the first live waiter, whatever Locker it is on.
func TestStrictFIFOAcrossLockers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	var lockers []*core.Locker
	for i := 0; i < 3; i++ {
		l, _ := locktest.NewLocker(t, srv)
		lockers = append(lockers, l)
	}
	ctx := locktest.Context(t)
	s, err := holder.Lock(ctx, "fifo", core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 9
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls, err := lockers[i%3].Lock(ctx, "fifo", core.WithWait(20*time.Second), core.WithTTL(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			ls.Unlock(ctx)
		}()
		waitQueueLen(t, direct, "fifo", int64(i+1)) // joined in this order
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v, want the joining order 0..%d", order, waiters-1)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters got the lock", len(order), waiters)
	}
}

// A waiter that gives up leaves the queue: the next one is handed the lock
// by the release. And a waiter that was handed the lock while it could not
// hear of it (its network stalled) and then gives up passes it on to the
// next waiter when its leave arrives.
func TestWaiterThatLeavesIsSkipped(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	next, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)

	t.Run("left before the release", func(t *testing.T) {
		gone, _ := locktest.NewLocker(t, srv)
		s, err := holder.Lock(ctx, "skip", core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		left := make(chan error, 1)
		go func() {
			_, err := gone.Lock(ctx, "skip", core.WithWait(300*time.Millisecond))
			left <- err
		}()
		waitQueueLen(t, direct, "skip", 1)
		res := waitFor(ctx, next, "skip", 5*time.Second)
		waitQueueLen(t, direct, "skip", 2)
		if err := <-left; !errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("the waiter that gave up: %v", err)
		}
		waitQueueLen(t, direct, "skip", 1) // its leave removed it
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		checkWoken(t, res, "skip")
	})

	t.Run("granted while stalled, then left", func(t *testing.T) {
		p := redistest.StartProxy(t, srv.Addr)
		o := srv.Options()
		o.Addr = p.Addr
		stalled := redis.NewClient(o)
		t.Cleanup(func() { stalled.Close() })
		gone := locktest.Locker(t, stalled)
		locktest.Warm(t, gone)
		s, err := holder.Lock(ctx, "handed", core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		left := make(chan error, 1)
		go func() {
			_, err := gone.Lock(ctx, "handed", core.WithWait(time.Second), core.WithTTL(time.Minute))
			left <- err
		}()
		waitQueued(t, direct, "handed", 1)
		res := waitFor(ctx, next, "handed", 10*time.Second)
		waitQueueLen(t, direct, "handed", 2)
		p.Stall() // the first waiter hears nothing, and its leave waits
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		owner := ownerIn(ctx, direct, "lockgate:{handed}")
		if owner == "" {
			t.Fatal("probe: the release handed the lock to nobody")
		}
		if err := <-left; err == nil {
			t.Fatal("the stalled waiter got the lock")
		}
		p.Unstall() // its leave arrives: it held the lock, so it passes it on
		checkWoken(t, res, "handed")
	})
}

// A waiter whose Locker is gone without leaving (closed while its network
// refuses it: a crash, for Redis) is handed the lock only until its queue
// entry would have expired, one and a half refresh intervals (TTL/2) after
// its last refresh; then the next waiter gets it, though its own next wake
// (its refresh) is 20s away (TTL 1 minute). Two cases:
//   - subscribed: the next waiter's room hears the grant, which says how
//     long the crashed waiter has, and wakes it then (nudge). Control: the
//     room wakes no one for another waiter's grant (no-nudge);
//   - late: the next waiter's attempt (queued in Redis) is answered only
//     after the release, so its room subscribes after the grant was
//     published; the check after the subscription reads the crashed
//     waiter's TTL and wakes it then. Control: late joiners are told
//     nothing (late-join-blind).
//
// Each control's next waiter, with a budget 3s past the crashed waiter's
// entry, is still waiting when it ends, busy. The same on one server, on a
// 3-master Cluster (each waiter's Locker reaches every node through proxies
// of its own) and under a sentinel. (The late case failed once in a
// clean-clone run, before the check read the TTL: under load, the next
// waiter had subscribed after the release.)
func TestCrashedWaiterCostsOneEntry(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster", "sentinel"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			d := crashDeploymentOf(t, topo)
			for _, c := range []struct {
				late    bool
				mutants []string
			}{{false, []string{"", "no-nudge"}}, {true, []string{"", "late-join-blind"}}} {
				for _, mutant := range c.mutants {
					t.Run(fmt.Sprintf("late=%v/mutant=%s", c.late, mutant), func(t *testing.T) {
						t.Parallel()
						crashedWaiterCost(t, d, fmt.Sprintf("crash-%v-%s", c.late, mutant), c.late, mutant)
					})
				}
			}
		})
	}
}

// crashDeployment is where crashedWaiterCost runs: one server, a 3-master
// Cluster, or a master and replica under a sentinel.
type crashDeployment struct {
	holder *core.Locker
	direct redis.UniversalClient
	// subs is a client of the node that serves channel (for its
	// subscribers' count)
	subs func(t *testing.T, channel string) *redis.Client
	// proxied is a Locker whose client reaches every node through fault
	// proxies of its own, closed with t
	proxied func(t *testing.T, opts ...core.Option) (*core.Locker, []*redistest.Proxy)
}

func crashDeploymentOf(t *testing.T, topo string) *crashDeployment {
	d := &crashDeployment{}
	switch topo {
	case "single":
		srv := redistest.Start(t)
		c := srv.Client(t)
		d.holder, d.direct = locktest.Locker(t, c), c
		d.subs = func(*testing.T, string) *redis.Client { return c }
		d.proxied = func(t *testing.T, opts ...core.Option) (*core.Locker, []*redistest.Proxy) {
			l, p := locktest.ProxiedLocker(t, srv, opts...)
			return l, []*redistest.Proxy{p}
		}
	case "cluster":
		cl := redistest.StartCluster(t, 3)
		cc := cl.Client(t)
		d.holder, d.direct = locktest.Locker(t, cc), cc
		d.subs = func(t *testing.T, channel string) *redis.Client {
			n, err := cc.MasterForKey(context.Background(), channel)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		d.proxied = func(t *testing.T, opts ...core.Option) (*core.Locker, []*redistest.Proxy) {
			c, ps := proxiedClusterClient(t, cl, proxiedTimeout)
			return locktest.Locker(t, c, opts...), ps
		}
	case "sentinel":
		sen := redistest.StartSentinel(t)
		c := sen.Client(t)
		d.holder, d.direct = locktest.Locker(t, c), c
		master := sen.Master.Client(t)
		d.subs = func(*testing.T, string) *redis.Client { return master }
		d.proxied = func(t *testing.T, opts ...core.Option) (*core.Locker, []*redistest.Proxy) {
			c, p := proxiedFailoverClient(t, sen, proxiedTimeout)
			return locktest.Locker(t, c, opts...), []*redistest.Proxy{p}
		}
	}
	return d
}

// proxiedTimeout is the proxied clients' read and write timeout:
// go-redis's default, as locktest.ProxiedLocker's, past the late case's
// held reply (2s), which would otherwise time out and be sent again after
// the release, and come back in time.
const proxiedTimeout = 3 * time.Second

func crashedWaiterCost(t *testing.T, d *crashDeployment, name string, late bool, mutant string) {
	ctx := locktest.Context(t)
	crashed, pc := d.proxied(t)
	next, pn := d.proxied(t, core.WithMutants(mutant))
	locktest.Warm(t, crashed)
	locktest.Warm(t, next)

	// The crashed waiter's entry lives 1.5s, refreshed every second: at
	// the crash it has 0.5s or more left, so the release grants it.
	ttl := 3 * time.Second
	if late {
		// The next waiter's reply is held 2s from Redis's answer: the
		// crashed waiter's grant, which lasts what is left of its entry
		// (4.5s from its last refresh), outlives that, so the check after
		// the next waiter's subscription finds it held.
		ttl = 9 * time.Second
	}
	s, err := d.holder.Lock(ctx, name, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan error, 1)
	go func() {
		_, err := crashed.Lock(ctx, name, core.WithWait(10*time.Second), core.WithTTL(ttl))
		gone <- err
	}()
	waitQueued(t, d.direct, name, 1)
	var held []*redistest.Hold
	if late {
		for _, p := range pn { // only the proxy of the name's node sees it
			held = append(held, p.HoldReply(redistest.MatchCommand("EVALSHA", "{"+name+"}"), 2*time.Second))
		}
	}
	wait := 10 * time.Second
	if mutant != "" {
		wait = ttl/2 + 3*time.Second // past the entry's life
	}
	waitStart := time.Now()
	res := waitFor(ctx, next, name, wait)
	waitQueueLen(t, d.direct, name, 2)
	channel := "lockgate:{" + name + "}"
	if !late {
		waitSubscribers(t, d.subs(t, channel), channel, 2)
	}
	for _, p := range pc {
		p.SetRefuse(true) // the crash: from now on nothing of it reaches Redis
	}
	crashed.Close()
	if err := <-gone; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("the crashed waiter's Lock: %v", err)
	}
	released := time.Now()
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		select {
		case <-h.Released():
			t.Fatal("the next waiter's reply came before the release: it was not late")
		default:
		}
	}
	if mutant != "" {
		if released.Sub(waitStart)+ttl/2+500*time.Millisecond > wait {
			// The fixed code would not have got it within this budget either.
			t.Fatalf("setup too slow: the release came %v into the control's %v budget, too late to show anything", released.Sub(waitStart), wait)
		}
		r := <-res
		if r.err == nil {
			t.Fatalf("control: the next waiter still got the lock %v after the release", time.Since(released))
		}
		if !errors.Is(r.err, core.ErrNotObtained) {
			t.Fatalf("control: the next waiter = %v, want busy at its budget's end", r.err)
		}
		return
	}
	checkWoken(t, res, name)
	took := time.Since(released)
	t.Logf("next waiter got the lock %v after the release; the crashed waiter's entry lives %v", took, ttl/2)
	if took > ttl/2+500*time.Millisecond {
		t.Fatalf("a crashed waiter cost %v, want at most its entry's life %v (+500ms)", took, ttl/2)
	}
}

// An uncontended release publishes nothing; a release with a waiter
// publishes once, on the lock's shard channel.
func TestNoPublishWithoutWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	publishes := func() int64 {
		m := allCommands(t, direct)
		return m["publish"] + m["spublish"]
	}
	before := publishes()
	for i := 0; i < 100; i++ {
		s, err := l.Lock(ctx, fmt.Sprintf("quiet:%d", i%5))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := publishes() - before; n != 0 {
		t.Fatalf("100 uncontended releases published %d messages", n)
	}
	// Control: with a waiter, the release publishes (the counter works).
	s, err := l.Lock(ctx, "loud")
	if err != nil {
		t.Fatal(err)
	}
	res := waitFor(ctx, other, "loud", 5*time.Second)
	waitQueued(t, direct, "loud", 1)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	checkWoken(t, res, "loud")
	if n := publishes() - before; n != 1 {
		t.Fatalf("a release with one waiter published %d messages, want 1", n)
	}
}

// 2,000 waiters of one Locker on 2,000 keys share one subscription
// connection, and their background traffic is bounded: joining, subscribing
// (in batches), and nothing more while they wait.
func TestManyWaitersOneConnection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	o := srv.Options()
	o.PoolSize, o.ReadTimeout = 200, 5*time.Second // a pool for 2,000 callers
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	const n = 2000
	var held []*core.Lease
	for i := 0; i < n; i++ {
		s, err := holder.Lock(ctx, fmt.Sprintf("many:%d", i), core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	before := readCommands(t, direct)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Lock(ctx, fmt.Sprintf("many:%d", i), core.WithWait(3*time.Second), core.WithTTL(time.Minute))
			errs <- err
		}()
	}
	// All queued and subscribed.
	for i := 0; ; i++ {
		subs := direct.PubSubShardChannels(ctx, "lockgate:{many:*}").Val()
		if len(subs) == n {
			break
		}
		if i == 500 {
			t.Fatalf("%d of %d channels subscribed", len(subs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	clients := direct.ClientList(ctx).Val()
	subConns := 0
	for _, line := range strings.Split(clients, "\n") {
		if strings.Contains(line, " ssub=") && !strings.Contains(line, " ssub=0 ") {
			subConns++
		}
	}
	if subConns != 1 {
		t.Fatalf("%d connections with shard subscriptions, want 1:\n%s", subConns, clients)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("waiter: %v", err)
		}
	}
	// Each waiter left its queue when its budget ended (in the background).
	for i := 0; ; i++ {
		q := direct.Keys(ctx, "lockgate:{many:*}:q").Val()
		if len(q) == 0 {
			break
		}
		if i == 500 {
			t.Fatalf("%d queues still there after the waiters gave up", len(q))
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := readCommands(t, direct)
	cmds := clientCommands(before, after)
	diff := func(name string) int64 { return after.client[name] - before.client[name] }
	t.Logf("2,000 waiters for 3s: %d commands from clients (%.2f per waiter): %d scripts, %d checks, %d (un)subscriptions",
		cmds, float64(cmds)/n, diff("evalsha"), diff("hget"), diff("ssubscribe")+diff("sunsubscribe"))
	// Each waiter joins and leaves (two scripts: no refresh within a TTL/3
	// of a minute), its lock is checked once when its subscription is
	// confirmed, and (un)subscriptions go in batches.
	if s := diff("evalsha"); s > 2*n {
		t.Errorf("%d scripts for %d waiters: they poll", s, n)
	}
	if c := diff("hget"); c > n {
		t.Errorf("%d checks for %d channels", c, n)
	}
	if c := diff("ssubscribe") + diff("sunsubscribe"); c > n {
		t.Errorf("%d (un)subscription commands for %d channels: not batched", c, n)
	}
	for _, s := range held {
		s.Unlock(ctx)
	}
}

// A grant published while a waiter's subscription is down (here: its
// connection killed in the same transaction as the release) is not lost:
// when go-redis resubscribes, the confirmation is checked against the
// lock's holder and the waiter learns it holds the lock, long before its
// next refresh (20s) would have told it.
func TestGrantMissedWhileResubscribing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	w, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	release, err := core.ScriptSource("release")
	if err != nil {
		t.Fatal(err)
	}
	ch := "lockgate:{missed}"
	// A holder in another process: only its release is needed.
	if err := direct.HSet(ctx, ch, "owner", "gone-holder", "fence", 1).Err(); err != nil {
		t.Fatal(err)
	}
	direct.PExpire(ctx, ch, time.Minute)
	res := waitFor(ctx, w, "missed", 5*time.Second)
	waitQueued(t, direct, "missed", 1)
	var numsub *redis.MapStringIntCmd
	var entries *redis.MapStringStringCmd
	var owner *redis.StringCmd
	_, err = direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ClientKillByFilter(ctx, "TYPE", "pubsub")
		numsub = p.PubSubShardNumSub(ctx, ch)
		entries = p.HGetAll(ctx, ch+":qt")
		p.Eval(ctx, string(release), []string{ch, core.FenceFloorKey(w, "missed"), ch + ":done:gone-holder", ch + ":q", ch + ":qt"}, "gone-holder", 600000, 60000)
		// Read in the transaction: once resubscribed, the waiter may take
		// and release the lock before a later read.
		owner = p.HGet(ctx, ch, "owner")
		return nil
	})
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	if n := numsub.Val()[ch]; n != 0 {
		t.Fatalf("probe: %d subscribers when the grant was published, want 0", n)
	}
	if o := owner.Val(); o == "" || o == "gone-holder" || entries.Val()[o] == "" {
		t.Fatalf("probe: the release did not hand the lock to the waiter (owner %q; the entries before it %v)", o, entries.Val())
	}
	checkWoken(t, res, "missed")
}

// A grant published before its waiter joined the Locker's room (the
// release ran between the waiter's queueing attempt and its reply) is kept
// for it when the lock's channel is already subscribed for another waiter
// of the Locker: the waiter holds the lock as soon as its reply arrives,
// not at its next refresh (10s). The reply of the first waiter's attempt
// is held by a proxy while the second waiter subscribes and the holder
// releases; the probe shows the lock was handed to the first waiter while
// its reply was still held.
func TestGrantBeforeJoin(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	p, l := proxiedLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := holder.Lock(ctx, "early", core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h := p.HoldReply(script(t, "acquire", "early"), 1500*time.Millisecond)
	first := timedTake(ctx, func() (*core.Lease, error) { return l.Lock(ctx, "early", core.WithWait(8*time.Second)) })
	within(t, h.Matched(), 5*time.Second, "the first waiter's attempt")
	second := waitFor(ctx, l, "early", 8*time.Second)
	waitQueued(t, direct, "early", 2)
	releaseWhileHeld(t, ctx, s, h)
	if owner := ownerIn(ctx, direct, "lockgate:{early}"); owner == "" {
		t.Fatal("probe: the release handed the lock to no one")
	}
	r := <-first
	if r.err != nil {
		t.Fatalf("first waiter: %v", r.err)
	}
	if r.took > 4*time.Second {
		t.Fatalf("first waiter got the lock after %v: the grant published before it joined was lost until its refresh", r.took)
	}
	checkWoken(t, second, "early")
}

// A hold handed to a waiter first lives only as long as the waiter's queue
// entry (TTL/2 after its last refresh); it then claims its whole TTL once,
// with the watchdog or without it. Here the entry lives 450ms and each
// lease is still held, in Redis and by its context, 700ms after the grant.
func TestGrantedHoldClaimsItsTTL(t *testing.T) {
	t.Parallel()
	for _, watchdog := range []bool{true, false} {
		t.Run("watchdog="+strconv.FormatBool(watchdog), func(t *testing.T) {
			srv := redistest.Start(t)
			holder, direct := locktest.NewLocker(t, srv)
			waiter, _ := locktest.NewLocker(t, srv)
			ctx := locktest.Context(t)
			key := "claim:" + strconv.FormatBool(watchdog)
			s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			opts := []core.LockOption{core.WithTTL(900 * time.Millisecond), core.WithWait(5 * time.Second)}
			if !watchdog {
				opts = append(opts, core.WithoutWatchdog())
			}
			got := make(chan *core.Lease, 1)
			go func() {
				l, err := waiter.Lock(ctx, key, opts...)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitQueued(t, direct, key, 1)
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l := <-got
			if l == nil {
				t.FailNow()
			}
			defer l.Unlock(ctx)
			granted := time.Now()
			select {
			case <-l.Done():
				t.Fatalf("granted lease lost after %v: %v", time.Since(granted), context.Cause(l.Context()))
			case <-time.After(700 * time.Millisecond):
			}
			if owner := ownerIn(ctx, direct, "lockgate:{"+key+"}"); owner == "" {
				t.Fatalf("700ms after the grant the lock is gone from Redis: the hold never claimed its TTL")
			}
		})
	}
}

// TryLock (and a fresh Lock) never jump a queue of live waiters: with the
// lock free in Redis (its holder expired without a release) and a live
// waiter whose retry is held back (its network stalled), another owner is
// answered busy, and its attempt grants the lock to the waiter in Redis,
// as a release would have; the waiter then has it. The probe: the waiter
// is queued when TryLock is sent, and the lock's owner after it.
func TestTryLockDoesNotJumpTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	p, waiter := proxiedLocker(t, srv)
	ctx := locktest.Context(t)
	if _, err := holder.Lock(ctx, "nojump", core.WithTTL(400*time.Millisecond), core.WithoutWatchdog()); err != nil {
		t.Fatal(err)
	}
	res := waitFor(ctx, waiter, "nojump", 10*time.Second)
	waitQueued(t, direct, "nojump", 1)
	p.Stall()
	defer p.Unstall()
	for i := 0; direct.Exists(ctx, "lockgate:{nojump}").Val() == 1; i++ {
		if i == 200 {
			t.Fatal("the holder's lock never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	queued := direct.ZRange(ctx, "lockgate:{nojump}:q", 0, -1).Val()
	if len(queued) != 1 {
		t.Fatalf("probe: %d waiters queued, want the stalled one", len(queued))
	}
	if _, err := other.TryLock(ctx, "nojump"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock with a live waiter queued = %v, want ErrNotObtained", err)
	}
	if _, err := other.Lock(ctx, "nojump", core.WithWait(100*time.Millisecond)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("Lock with a live waiter queued = %v, want ErrNotObtained", err)
	}
	if owner := ownerIn(ctx, direct, "lockgate:{nojump}"); owner != queued[0] {
		t.Fatalf("probe: the lock's owner is %q, want the stalled waiter %q", owner, queued[0])
	}
	p.Unstall()
	checkWoken(t, res, "nojump")
}

// timed is what timedTake reports: the call's error (or its Unlock's) and
// how long the call took.
type timed struct {
	err  error
	took time.Duration
}

// timedTake runs take on a goroutine, releases what it got, and reports how
// long take took.
func timedTake(ctx context.Context, take func() (*core.Lease, error)) <-chan timed {
	res := make(chan timed, 1)
	go func() {
		start := time.Now()
		s, err := take()
		took := time.Since(start)
		if err == nil {
			err = s.Unlock(context.WithoutCancel(ctx))
		}
		res <- timed{err, took}
	}()
	return res
}

// releaseWhileHeld releases s while h still holds a reply back, and fails t
// if h let the reply go first: the grant then came after it, and the
// scenario did not happen.
func releaseWhileHeld(t *testing.T, ctx context.Context, s *core.Lease, h *redistest.Hold) {
	t.Helper()
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Released():
		t.Fatal("probe: the held reply was released before the grant; the scenario did not happen")
	default:
	}
}

// proxiedLocker is a Locker whose client (go-redis defaults) reaches srv
// through a fault proxy, with its scripts loaded and the server checked.
func proxiedLocker(t *testing.T, srv *redistest.Server) (*redistest.Proxy, *core.Locker) {
	t.Helper()
	p := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	locktest.Warm(t, l)
	return p, l
}
