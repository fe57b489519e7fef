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

// lossWait is how long after a node answers again the tests below wait
// for a lease's loss: far under the next renewal (their TTL is monitorTTL,
// renewed at a third of it, 20s), far over the monitor's reconnect interval
// and a round trip, and over a loaded CI run's delays (3s was passed there
// once, by an operator's failover seen through Sentinel).
const lossWait = 6 * time.Second

// monitorTTL is the TTL of the leases of the tests below.
const monitorTTL = 60 * time.Second

// watched waits until every node of nodes has one connection subscribed
// to the Locker's monitor channel (polled: the server is the only one who
// can tell).
func watched(t *testing.T, nodes ...*redis.Client) {
	t.Helper()
	ctx := locktest.Context(t)
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range nodes {
		for {
			n, err := c.PubSubNumSub(ctx, "lockgate:monitor").Result()
			if err == nil && n["lockgate:monitor"] == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no monitor connection on %s: %v %v", c.Options().Addr, n, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// lossSeen waits lossWait for s to end after an event at since: it must
// (seen) with cause ErrLockLost, or must not (a control).
func lossSeen(t *testing.T, s *core.Lease, seen bool, since time.Time, what string) {
	t.Helper()
	select {
	case <-s.Done():
		if !seen {
			t.Fatalf("the lease ended %v after %s without a monitor: the control did not hold", time.Since(since), what)
		}
		t.Logf("lease ended %v after %s", time.Since(since), what)
		if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", cause)
		}
	case <-time.After(lossWait):
		if seen {
			t.Fatalf("the lease outlived %s by %v: the loss was not seen", what, lossWait)
		}
	}
}

// A node that restarts empty takes its locks with it: the holder's lease
// ends (ErrLockLost) as soon as the node answers again, not at its next
// renewal (a third of the 60s TTL). Control: with no monitor the lease
// outlives the same wait.
func TestLossSeenWhenNodeRestarts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mutants string
		seen          bool
	}{{"monitored", "", true}, {"control no-monitor", "no-monitor", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			l, c := locktest.NewLocker(t, srv, core.WithMutants(tc.mutants))
			ctx := locktest.Context(t)
			s, err := l.Lock(ctx, "restart", core.WithTTL(monitorTTL))
			if err != nil {
				t.Fatal(err)
			}
			if tc.seen {
				watched(t, c)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			lossSeen(t, s, tc.seen, time.Now(), "the node answered again")
			s.Unlock(ctx)
		})
	}
}

// The same on a 3-master Cluster: one master restarts empty (keeping its
// slots); the leases it held end at once, those on the other masters live
// on.
func TestLossSeenWhenClusterNodeRestarts(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	restarted := cl.Servers[0]
	leases := lockPerNode(t, cl, c, l, "restart", 2, core.WithTTL(monitorTTL))
	var nodes []*redis.Client
	for _, srv := range cl.Servers {
		nodes = append(nodes, srv.Client(t))
	}
	watched(t, nodes...)
	if err := restarted.Restart(); err != nil {
		t.Fatal(err)
	}
	// A restarted Cluster node accepts connections at once but answers
	// CLUSTERDOWN until it has seen its peers: the loss can be seen from
	// when it serves its slots again.
	var probe string // a key the restarted node serves
	for _, h := range leases {
		if h.node == restarted {
			probe = "lockgate:{" + h.s.Key() + "}"
		}
	}
	up := time.Now()
	serving := make(chan time.Time, 1)
	go func() {
		for time.Since(up) < lossWait {
			if err := nodes[0].Get(ctx, probe).Err(); !redis.HasErrorPrefix(err, "CLUSTERDOWN") {
				serving <- time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		serving <- time.Time{}
	}()
	for _, h := range leases {
		if h.node != restarted {
			continue
		}
		select {
		case <-h.s.Done():
			t.Logf("lease %s ended %v after its node accepted connections", h.s.Key(), time.Since(up))
		case <-time.After(lossWait):
			t.Fatalf("lease %s outlived its node's restart by %v", h.s.Key(), lossWait)
		}
	}
	if at := <-serving; !at.IsZero() {
		t.Logf("the node served its slots again %v after it accepted connections", at.Sub(up))
	}
	lostWithNode(t, leases, restarted, "restarted empty")
}

// A Sentinel failover to a replica that had not seen the lock (the replica
// made to forget it: a write it never received), the master killed or
// failed over by an operator while it stays up (its connections stay: the
// client follows the new master, whose run id differs): the lease ends soon
// after the promoted replica serves, not at the next renewal. Control: with
// no monitor the lease outlives the same wait.
func TestLossSeenAfterSentinelFailover(t *testing.T) {
	t.Parallel()
	kill := func(sn *redistest.Sentinel) error { return sn.KillMaster(30 * time.Second) }
	manual := func(sn *redistest.Sentinel) error { return sn.FailoverNow(30 * time.Second) }
	for _, tc := range []struct {
		name, mutants string
		failover      func(*redistest.Sentinel) error
		seen          bool
	}{
		{"master killed", "", kill, true},
		{"operator's failover", "", manual, true},
		{"control no-monitor", "no-monitor", kill, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sn := redistest.StartSentinel(t)
			l := locktest.Locker(t, sn.Client(t), core.WithMutants(tc.mutants))
			ctx := locktest.Context(t)
			s, err := l.Lock(ctx, "failover", core.WithTTL(monitorTTL))
			if err != nil {
				t.Fatal(err)
			}
			rc := sn.Replica.Client(t)
			if err := rc.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Del(ctx, "lockgate:{failover}").Err(); err != nil {
				t.Fatal(err)
			}
			if tc.seen {
				watched(t, sn.Master.Client(t))
			}
			if err := tc.failover(sn); err != nil {
				t.Fatal(err)
			}
			lossSeen(t, s, tc.seen, time.Now(), "the sentinel reported the replica promoted")
			s.Unlock(ctx)
		})
	}
}
