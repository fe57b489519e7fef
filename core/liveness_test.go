package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The liveness of waiting: a lock that is free, or granted to a live waiter,
// is taken by a waiter at once, whatever the topology, the TTLs of the
// waiters, the timing of replies and grants, and however many waiters died
// in the queue. Each test runs its scenario with the defect it guards
// against put back (core.WithMutants) as its control: it must then fail.

// contended runs keys × perKey goroutines spread over lockers, each taking
// its key cycles times with a 0.2ms hold, every Lock waiting up to wait with
// a TTL of a minute (a waiter that misses its grant retries only at its
// refresh, 20s later: past the wait). It returns the errors, and the
// handoff latencies (a release's end to the next holder's Lock return).
func contended(t *testing.T, lockers []*core.Locker, keys, perKey, cycles int, wait time.Duration, during func()) ([]error, []time.Duration) {
	t.Helper()
	ctx := locktest.Context(t)
	if during != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			during()
		}()
	}
	var mu sync.Mutex
	var errs []error
	var handoffs []time.Duration
	released := make([]time.Time, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for g := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := lockers[(k+g)%len(lockers)]
				key := fmt.Sprintf("hot:%d", k)
				for range cycles {
					s, err := l.Lock(ctx, key, core.WithWait(wait), core.WithTTL(time.Minute))
					got := time.Now()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					mu.Lock()
					if r := released[k]; !r.IsZero() {
						handoffs = append(handoffs, got.Sub(r))
					}
					mu.Unlock()
					time.Sleep(200 * time.Microsecond)
					mu.Lock()
					released[k] = time.Time{}
					mu.Unlock()
					err = s.Unlock(ctx)
					mu.Lock()
					released[k] = time.Now()
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return errs, handoffs
}

// cutPubSub waits (bounded) until some master serves shard channels of
// several slots to one connection, then kills every Pub/Sub connection on
// every master: the Lockers must subscribe again.
func cutPubSub(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	var ncs []*redis.Client
	for _, s := range cl.Servers {
		nc := redis.NewClient(s.Options())
		defer nc.Close()
		ncs = append(ncs, nc)
	}
	for i := 0; i < 500; i++ {
		most := 0
		for _, nc := range ncs {
			most = max(most, len(nc.PubSubShardChannels(ctx, "*").Val()))
		}
		if most >= 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, nc := range ncs {
		nc.ClientKillByFilter(ctx, "TYPE", "pubsub")
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

// Contended keys spread over a Cluster's masters are handed off as on one
// server: 8, 16 and 64 keys, 6, 2 and 2 goroutines per key over 3 Lockers
// (each on its own client), every Lock obtained within its wait, also when
// the Pub/Sub connections are killed on every master in the middle (before:
// on the Cluster, 22–28 of 48 goroutines failed after 20s, because the
// Locker subscribed the channels of one node in one SSUBSCRIBE, and go-redis
// resubscribes them so after a reconnect; a Cluster refuses channels of
// different slots in one). The per-handoff latency of both topologies is
// logged side by side. Control: the merged subscriptions put back, the
// Cluster stalls after the cut.
func TestContendedKeysHandOffOnCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	lockersOn := func(t *testing.T, cluster bool, opts ...core.Option) []*core.Locker {
		var ls []*core.Locker
		for range 3 {
			var c redis.UniversalClient
			if cluster {
				c = cl.Client(t)
			} else {
				c = srv.Client(t)
			}
			ls = append(ls, locktest.Locker(t, c, opts...))
		}
		return ls
	}
	for _, w := range []struct{ keys, perKey int }{{8, 6}, {16, 2}, {64, 2}} {
		t.Run(fmt.Sprintf("keys=%d", w.keys), func(t *testing.T) {
			var p50 [2]time.Duration
			for i, cluster := range []bool{false, true} {
				start := time.Now()
				var during func()
				if cluster {
					during = func() { cutPubSub(t, cl) }
				}
				errs, handoffs := contended(t, lockersOn(t, cluster), w.keys, w.perKey, 10, 5*time.Second, during)
				if len(errs) > 0 {
					t.Fatalf("cluster=%v: %d of %d goroutines failed, first: %v", cluster, len(errs), w.keys*w.perKey, errs[0])
				}
				p50[i] = percentile(handoffs, 0.5)
				t.Logf("cluster=%v: %d handoffs in %v, handoff p50 %v p99 %v", cluster, len(handoffs), time.Since(start).Round(time.Millisecond),
					p50[i], percentile(handoffs, 0.99))
			}
			t.Logf("handoff p50: one server %v, cluster %v", p50[0], p50[1])
		})
	}
	t.Run("control", func(t *testing.T) {
		errs, _ := contended(t, lockersOn(t, true, core.WithMutants("merge-subs")), 8, 6, 10, 2*time.Second, func() { cutPubSub(t, cl) })
		if len(errs) == 0 {
			t.Fatal("control: with the subscriptions of a node merged, no waiter stalled on the Cluster")
		}
	})
}

// A waiter whose replies turn slow just as it is granted the lock (the
// reply of its refresh held 450ms by a proxy across the release, so that the
// grant it then reads names a hold whose first life, 300ms, has run out)
// obtains the lock: it claims it with an attempt, under the same owner.
// Before, the late grant was undone and the wait went on under that owner,
// whose done marker the undo had just written: ErrUnavailable ("this
// acquisition already ended") on a healthy Redis, every round. Control:
// that put back.
func TestSlowRepliesWhenGranted(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "late-grant"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			srv := redistest.Start(t)
			holder, direct := locktest.NewLocker(t, srv)
			waiter, p := locktest.ProxiedLocker(t, srv, core.WithMutants(mutant))
			locktest.Warm(t, waiter)
			ctx := locktest.Context(t)
			failed := 0
			const rounds = 3
			for round := range rounds {
				key := fmt.Sprintf("slow:%d", round)
				s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() {
					w, err := waiter.Lock(ctx, key, core.WithTTL(600*time.Millisecond), core.WithWait(5*time.Second))
					if err == nil {
						w.Unlock(ctx)
					}
					got <- err
				}()
				waitQueued(t, direct, key, 1)
				// The release comes after the held refresh ran in Redis (its
				// reply reached the proxy), not before it.
				h := p.HoldReply(script(t, "acquire", key), 450*time.Millisecond)
				within(t, h.Matched(), 2*time.Second, "the waiter's refresh")
				within(t, h.Answered(), 2*time.Second, "Redis's reply to the held refresh")
				if err := s.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				err = <-got
				if err != nil {
					failed++
					t.Logf("round %d: %v", round, err)
					if mutant == "" || !errors.Is(err, core.ErrUnavailable) {
						t.Errorf("round %d: the slow waiter = %v, want the lock", round, err)
					}
				}
			}
			if mutant != "" && failed == 0 {
				t.Fatal("control: with the late grant undone, every slow waiter still got the lock")
			}
		})
	}
}

// A grant published before its waiter joined the Locker's room is not lost
// however many other grants the room sees meanwhile: with 70 waiters of
// another Locker ahead (each granted and releasing while the waiter's
// queueing reply is held by a proxy), the waiter holds the lock as soon as
// its reply arrives, well before its refresh (20s; TTL 1m). Before, the
// grants to the other Locker's waiters filled a 64-slot buffer and the
// waiter's was dropped: it got the lock at its refresh, after its budget
// (15s) here. Control: the early grants dropped (and nothing read again).
// The reply is held until the grant is seen in Redis and the Locker's room
// has had its message, then let go (Let): a fixed hold (3s) was outlasted
// by the 70 hand-overs ahead on a loaded machine, and a message slower than
// the reply made the grant one to a waiter present, not an early one.
//
// The same on a 3-master Cluster: the proxy holds the reply of the lock's
// master, and the room's grants come through that master's shard.
func TestGrantBehindManyOthers(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "drop-early"} {
		t.Run("single/mutant="+mutant, func(t *testing.T) {
			srv := redistest.Start(t)
			holder, direct := locktest.NewLocker(t, srv)
			others, _ := locktest.NewLocker(t, srv)
			// The client waits for the held reply as long as it is held.
			p, c := lateClient(t, srv, time.Minute)
			grantBehindManyOthers(t, mutant, holder, others, direct, c, p)
		})
		t.Run("cluster/mutant="+mutant, func(t *testing.T) {
			cl := redistest.StartCluster(t, 3)
			direct := cl.Client(t)
			holder, others := locktest.Locker(t, direct), locktest.Locker(t, cl.Client(t))
			c, ps := proxiedClusterClient(t, cl, time.Minute)
			grantBehindManyOthers(t, mutant, holder, others, direct, c, proxyOfSlot(t, cl, ps, core.SlotOf(behind)))
		})
	}
}

// behind is the lock TestGrantBehindManyOthers waits for.
const behind = "behind"

// grantBehindManyOthers is TestGrantBehindManyOthers with mutant ("" for
// none): holder and others are Lockers of direct's deployment, c its client
// through p, the proxy in front of the node that serves the lock behind.
func grantBehindManyOthers(t *testing.T, mutant string, holder, others *core.Locker, direct, c redis.UniversalClient, p *redistest.Proxy) {
	var ev locktest.Events
	l := locktest.Locker(t, c, core.WithMutants(mutant), core.WithObserver(&ev))
	const key, ahead = behind, 70
	// A token for each grant message the room handled (room to spare).
	delivered := make(chan struct{}, 4*ahead)
	core.OnDelivered(l, func() {
		select {
		case delivered <- struct{}{}:
		default:
		}
	})
	locktest.Warm(t, l)
	ctx := locktest.Context(t)
	s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// A first waiter of the same Locker subscribes its room to the
	// lock's channel, so the later grants reach the room before the
	// late waiter has joined it.
	firstDone := waitFor(ctx, l, key, 10*time.Second)
	waitQueued(t, direct, key, 1)
	var wg sync.WaitGroup
	for i := range ahead {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := others.Lock(ctx, key, core.WithWait(10*time.Second), core.WithTTL(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			s.Unlock(ctx)
		}()
		waitQueued(t, direct, key, int64(i+2))
	}
	// Held until the probe below has seen the grant (Let), so a
	// loaded machine's slow hand-overs cannot outlast the hold.
	h := p.HoldReply(script(t, "acquire", key), time.Minute)
	defer h.Let()
	type res struct {
		err error
		got time.Time
	}
	late := make(chan res, 1)
	go func() {
		w, err := l.Lock(ctx, key, core.WithTTL(time.Minute), core.WithWait(15*time.Second))
		r := res{err: err, got: time.Now()}
		if err == nil {
			w.Unlock(ctx)
		}
		late <- r
	}()
	within(t, h.Matched(), 5*time.Second, "the late waiter's queueing attempt")
	// One more waiter of the Locker, behind the late one, keeps the
	// room subscribed after the first waiter has gone.
	waitQueued(t, direct, key, ahead+2)
	lastDone := waitFor(ctx, l, key, 30*time.Second)
	waitQueued(t, direct, key, ahead+3)
	// And it has joined the room (its EventWaiting, after the
	// first waiter's) before the first waiter leaves: else the room
	// could unsubscribe in between, and the late waiter's join
	// would check Redis afresh, which finds its grant whatever the
	// control drops.
	joined := 0
	if _, ok := ev.Wait(ctx, func(e core.Event) bool {
		if locktest.Is(core.EventWaiting, key)(e) {
			joined++
		}
		return joined == 2
	}); !ok {
		t.Fatal("the last waiter never joined the room")
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkWoken(t, firstDone, key)
	if owner := ownerIn(ctx, direct, "lockgate:{"+key+"}"); owner == "" {
		t.Fatal("probe: the lock was not handed to the late waiter while its reply was held")
	}
	select {
	case <-h.Released():
		t.Fatal("probe: the late waiter's reply came before its grant; the scenario did not happen")
	default:
	}
	// The room has had every grant, the late waiter's too (the
	// holder's to the first waiter, 70, then its own), before the
	// reply goes: else the grant could come after the late waiter
	// joined, as a grant to a waiter present, which the control
	// does not drop.
	for range ahead + 2 {
		within(t, delivered, 10*time.Second, "the room's next grant message")
	}
	h.Let()
	<-h.Released()
	replied := time.Now()
	r := <-late
	defer checkWoken(t, lastDone, key)
	if mutant != "" {
		if r.err == nil {
			t.Fatalf("control: with early grants dropped, the late waiter still got the lock %v after its reply", r.got.Sub(replied))
		}
		return
	}
	if r.err != nil {
		t.Fatalf("the late waiter = %v, want the lock its reply came after", r.err)
	}
	t.Logf("lease %v after the reply", r.got.Sub(replied).Round(time.Millisecond))
}

// A lease time above MaxTTL is bad input (ErrInvalid, nothing sent) for New,
// Lock and Extend: before, sent+TTL overflowed the validity, so a lock was
// taken, undone and reported unavailable. Control: MaxTTL itself works.
func TestTTLAboveMax(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	huge := core.WithTTL(core.MaxTTL + time.Nanosecond)
	if _, err := core.New(direct, huge); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("New(WithTTL(MaxTTL+1ns)) = %v, want ErrInvalid", err)
	}
	if _, err := l.Lock(ctx, "huge", core.WithTTL(1<<62)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Lock(WithTTL(2^62ns)) = %v, want ErrInvalid", err)
	}
	if locktest.Held(t, ctx, direct, "huge") {
		t.Fatal("an invalid TTL took the lock")
	}
	s, err := l.Lock(ctx, "huge", core.WithTTL(core.MaxTTL))
	if err != nil {
		t.Fatalf("control: Lock(WithTTL(MaxTTL)) = %v", err)
	}
	if err := s.Extend(ctx, core.MaxTTL+time.Nanosecond); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Extend(MaxTTL+1ns) = %v, want ErrInvalid", err)
	}
	if d, err := s.TTL(ctx); err != nil || d < core.MaxTTL-time.Minute {
		t.Fatalf("control: TTL of a MaxTTL lease = %v, %v", d, err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Lock through another Locker with a lease of the first in its context
// re-enters only the same lock: through a Locker of another prefix it is a
// fresh acquisition under an owner of its own (before, it took the other
// prefix's lock under the first lease's owner id), and a late reply there
// is undone like any other, leaving nothing held. Control: the same
// scenario with the lock then really held shows the check would see it.
func TestReentryThroughAnotherPrefix(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, direct := locktest.NewLocker(t, srv, core.WithPrefix("a:"))
	p, c := lateClient(t, srv, 300*time.Millisecond)
	b := locktest.Locker(t, c, core.WithPrefix("b:"))
	locktest.Warm(t, b)
	ctx := locktest.Context(t)
	outer, err := a.Lock(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	inner, err := b.Lock(outer.Context(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if inner.Reentrant() {
		t.Fatal("a Lock through a Locker of another prefix re-entered the first lease: it names another lock")
	}
	ao := ownerIn(ctx, direct, "a:{shared}")
	bo := ownerIn(ctx, direct, "b:{shared}")
	if ao == "" || bo == "" || ao == bo {
		t.Fatalf("owners of a:{shared} %q and b:{shared} %q: want two, distinct", ao, bo)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The same through a late reply: the budget ends first, the attempt
	// is undone when its reply comes.
	src, err := core.ScriptSource("acquire")
	if err != nil {
		t.Fatal(err)
	}
	h := p.HoldReply(redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(src))), "b:{shared}"), time.Second)
	wctx, cancel := context.WithTimeout(outer.Context(), 200*time.Millisecond)
	_, err = b.Lock(wctx, "shared")
	cancel()
	if !errors.Is(err, core.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with its reply held = %v, want unavailable or the deadline", err)
	}
	select {
	case <-h.Matched():
	default:
		t.Fatal("probe: the acquire whose reply is held was never sent")
	}
	<-h.Released()
	waitGone(t, direct, "b:{shared}")
	if direct.Exists(ctx, "a:{shared}").Val() != 1 {
		t.Fatal("control: the first lease's lock, held, is not seen in Redis")
	}
}
