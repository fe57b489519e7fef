package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A waiter's notifications follow its lock when the lock's slot moves to
// another master (resharding) while it waits: the old master unsubscribes
// the Locker's connection from the channel, the Locker subscribes it on the
// new master, and the release there hands the waiter the lock well within
// its budget (its next refresh is 20s away). Control: the server's
// unsubscribe ignored, as go-redis's own Pub/Sub would, the waiter misses
// the grant and ends busy.
func TestWaitFollowsSlotMigration(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	for _, mutant := range []string{"", "stay-subscribed"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			direct := cl.Client(t)
			holder := locktest.Locker(t, cl.Client(t))
			waiter := locktest.Locker(t, cl.Client(t), core.WithMutants(mutant))
			ctx := locktest.Context(t)
			key := "migrating:" + mutant
			ch := "lockgate:{" + key + "}"
			s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			got := waitFor(ctx, waiter, key, 5*time.Second)
			waitQueued(t, direct, key, 1)
			slot := int(direct.ClusterKeySlot(ctx, ch).Val())
			from := cl.ServerForSlot(slot)
			to := 0
			for i, srv := range cl.Servers {
				if srv != from {
					to = i
				}
			}
			if err := cl.MigrateSlot(slot, to, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			nc := redis.NewClient(cl.Servers[to].Options())
			defer nc.Close()
			subscribed := func() bool { return nc.PubSubShardNumSub(ctx, ch).Val()[ch] > 0 }
			for i := 0; !subscribed(); i++ {
				if i == 100 {
					if mutant == "" {
						t.Fatal("the waiter's Locker never subscribed the channel on the lock's new master")
					}
					break // the control: it does not follow
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if mutant != "" {
				if r.err == nil && r.inTime {
					t.Fatal("control: with the server's unsubscribe ignored, the waiter was still handed the lock")
				}
				return
			}
			if r.err != nil || !r.inTime {
				t.Fatalf("waiter after the slot moved = %v (in time: %v), want the lock from the release", r.err, r.inTime)
			}
		})
	}
}

// A waiter whose lock's master restarts empty (the lock and the queue gone
// with it) takes the now free lock as soon as the Locker's connection to
// that master is back, on one server and on a Cluster: the check after
// resubscribing finds the lock held by no one and wakes its waiters (before,
// only a waiter that held the lock was woken: the others waited for the
// holder's TTL, a minute here). Control: that put back, the waiter ends
// busy.
func TestWaitAfterMasterRestart(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		for _, mutant := range []string{"", "check-owner"} {
			t.Run(topo+"/mutant="+mutant, func(t *testing.T) {
				var srv *redistest.Server
				var client func() redis.UniversalClient
				key := "restart:" + topo
				if topo == "single" {
					srv = redistest.Start(t)
					client = func() redis.UniversalClient { return srv.Client(t) }
				} else {
					cl := redistest.StartCluster(t, 3)
					client = func() redis.UniversalClient { return cl.Client(t) }
					slot := int(cl.Client(t).ClusterKeySlot(context.Background(), "lockgate:{"+key+"}").Val())
					srv = cl.ServerForSlot(slot)
					t.Cleanup(func() {
						if err := cl.WaitReady(20 * time.Second); err != nil {
							t.Error(err)
						}
					})
				}
				direct := client()
				holder := locktest.Locker(t, client())
				waiter := locktest.Locker(t, client(), core.WithMutants(mutant))
				ctx := locktest.Context(t)
				if _, err := holder.Lock(ctx, key, core.WithTTL(time.Minute)); err != nil {
					t.Fatal(err)
				}
				got := waitFor(ctx, waiter, key, 5*time.Second)
				waitQueued(t, direct, key, 1)
				if err := srv.Restart(); err != nil { // the fault: empty, no persistence
					t.Fatal(err)
				}
				r := <-got
				if mutant != "" {
					if r.err == nil && r.inTime {
						t.Fatal("control: with only holders woken, the waiter still took the free lock")
					}
					if !errors.Is(r.err, core.ErrNotObtained) {
						t.Fatalf("control: waiter = %v, want busy", r.err)
					}
					return
				}
				if r.err != nil || !r.inTime {
					t.Fatalf("waiter after its master restarted empty = %v (in time: %v), want the free lock", r.err, r.inTime)
				}
			})
		}
	}
}

// A waiter's notifications follow a Sentinel failover: the Locker's Pub/Sub
// connection to the old master is closed (Sentinel kills the demoted
// master's clients), the Locker subscribes again through the failover
// client (the new master), and the holder's release there hands the waiter
// the lock within its budget (its next refresh is 20s away). Control: no
// release, the waiter ends busy.
func TestWaitFollowsSentinelFailover(t *testing.T) {
	t.Parallel()
	for _, release := range []bool{true, false} {
		t.Run(fmt.Sprintf("release=%v", release), func(t *testing.T) {
			st := redistest.StartSentinel(t)
			wc := st.Client(t)
			waiter := locktest.Locker(t, wc)
			ctx := locktest.Context(t)
			s, got := queuedThroughFailover(t, st, st.Client(t), waiter, "failover")
			// Not yet made a replica, the old master still takes writes:
			// the release and the waiter's claim go to the new one once
			// both clients have moved there (a release on the old master
			// granted it there, and the waiter's Unlock on the new one
			// found nothing: "not held").
			waitReaches(t, wc, st.Master.Addr)
			if release {
				if err := s.Unlock(ctx); err != nil {
					t.Fatalf("the holder's release on the new master: %v", err)
				}
			}
			r := <-got
			if !release {
				if !errors.Is(r.err, core.ErrNotObtained) {
					t.Fatalf("control: with no release the waiter = %v, want busy", r.err)
				}
				return
			}
			if r.err != nil || !r.inTime {
				t.Fatalf("waiter after the failover = %v (in time: %v), want the lock from the release", r.err, r.inTime)
			}
		})
	}
}

// A waiting Lock on a Cluster client whose slot map never loaded (its seed
// is behind a proxy that holds every reply) returns within its budget: the
// attempt fails on the budget's end as a failure that may pass, and the
// waiter's joining the wait room does not load the slot map on the
// caller's goroutine (3s of the client's read timeout, here). Control: with
// the load-slots mutant it does, and the Lock returns seconds late.
func TestClusterWaitWithoutSlotMapKeepsBudget(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	ctx := locktest.Context(t)
	const budget = 200 * time.Millisecond
	for _, mutant := range []string{"", "load-slots"} {
		p := redistest.StartProxy(t, cl.Addrs[0])
		p.Stall()
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr}, ContextTimeoutEnabled: true, MaxRetries: -1})
		l, err := core.New(c, core.WithMutants(mutant))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = l.Lock(ctx, "noslots", core.WithWait(budget))
		took := time.Since(start)
		p.Unstall()
		l.Close()
		c.Close()
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("%q: Lock with no slot map: %v, want unavailable", mutant, err)
		}
		t.Logf("%q: unavailable after %v (budget %v)", mutant, took, budget)
		switch {
		case mutant == "" && took > budget+250*time.Millisecond:
			t.Fatalf("Lock took %v, past its %v budget", took, budget)
		case mutant != "" && took < time.Second:
			t.Fatalf("control: joining with a slot-map load took only %v", took)
		}
	}
}

// A waiter's notifications follow a Sentinel failover client's master even
// while the old master has not been made a replica (here it refuses
// Sentinel's REPLICAOF, so Sentinel never kills its clients): the Locker
// sees its commands reach another server and subscribes there, and the
// holder's release on the new master hands the waiter the lock within its
// budget (its next refresh is 20s away). Control: the stay-on-master
// mutant, subscribed on the old master still, ends busy.
func TestWaitFollowsMasterNotReconfigured(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "stay-on-master"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			t.Parallel()
			st := redistest.StartSentinel(t)
			hc := st.Client(t)
			waiter := locktest.Locker(t, st.Client(t), core.WithMutants(mutant))
			ctx := locktest.Context(t)
			if err := st.Master.Client(t).Do(ctx, "ACL", "SETUSER", "default", "-replicaof", "-slaveof").Err(); err != nil {
				t.Fatal(err)
			}
			s, got := queuedThroughFailover(t, st, hc, waiter, "unreconfigured")
			if err := s.Unlock(ctx); err != nil {
				t.Fatalf("the holder's release on the new master: %v", err)
			}
			r := <-got
			if mutant != "" {
				if !errors.Is(r.err, core.ErrNotObtained) {
					t.Fatalf("control: subscribed on the old master, the waiter = %v, want busy", r.err)
				}
				return
			}
			if r.err != nil || !r.inTime {
				t.Fatalf("waiter after the failover = %v (in time: %v), want the lock from the release", r.err, r.inTime)
			}
		})
	}
}

// waitReaches waits (up to 10s) until c's commands reach the server at
// addr (CLIENT INFO's laddr): a failover client that has moved to a new
// master.
func waitReaches(t *testing.T, c redis.UniversalClient, addr string) {
	t.Helper()
	ctx := context.Background()
	// Polling: go-redis tells no one when its failover client moves to a
	// new master (it hears Sentinel's switch on a connection of its own).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if info, err := c.ClientInfo(ctx).Result(); err == nil && info.LAddr == addr {
			return
		}
	}
	t.Fatalf("the client's commands did not reach %s within 10s", addr)
}

// queuedThroughFailover: a holder on client hc takes key for a minute, and
// waiter queues for it with a budget that outlasts what the failover may
// take (10s; in a loaded run it took nearly all of an earlier 5s budget,
// and the release came after it), yet ends before the waiter's first
// refresh (20s): only a release can hand it the lock. Then the sentinels
// fail over (the fault). It returns the holder's lease and the waiter's
// result to come.
func queuedThroughFailover(t *testing.T, st *redistest.Sentinel, hc redis.UniversalClient, waiter *core.Locker, key string) (*core.Lease, <-chan waitResult) {
	t.Helper()
	ctx := locktest.Context(t)
	s, err := locktest.Locker(t, hc).Lock(ctx, key, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := waitFor(ctx, waiter, key, 12*time.Second)
	waitQueued(t, st.Client(t), key, 1)
	if err := st.Failover(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The old master may take writes until Sentinel makes it a replica:
	// the holder's release goes to the new one once its client moved.
	waitReaches(t, hc, st.Master.Addr)
	return s, got
}
