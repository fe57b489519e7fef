package redistest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/redistest"
)

// TestSentinelClientWritesToMaster writes through the failover client and
// finds the value on the master, then, after Sync, on the replica.
func TestSentinelClientWritesToMaster(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinel(t)
	c := st.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET through the failover client: %q, %v", v, err)
	}
	if v, err := st.Master.Client(t).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the master: %q, %v", v, err)
	}
	if err := st.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if v, err := st.Replica.Client(t).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the replica after Sync: %q, %v", v, err)
	}
	// Control: the replica refuses writes, so the client did not write there.
	if err := st.Replica.Client(t).Set(ctx, "k2", "v", 0).Err(); err == nil {
		t.Fatal("the replica accepted a write")
	}
}

// TestSentinelFailoverClientFollows promotes the replica and checks that the
// failover client then writes to the new master.
func TestSentinelFailoverClientFollows(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinel(t)
	c := st.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := st.Master
	if err := st.Failover(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st.Master == old || st.Replica != old {
		t.Fatal("Failover did not swap Master and Replica")
	}
	nm := st.Master.Client(t)
	// The client learns of the switch asynchronously (sentinel Pub/Sub):
	// retry, bounded, until a write lands on the new master.
	var lastErr error
	for i := 0; i < 100; i++ {
		if lastErr = c.Set(ctx, "after", i, 0).Err(); lastErr == nil {
			if n, err := nm.Get(ctx, "after").Int(); err == nil && n == i {
				break
			}
		}
		if i == 99 {
			t.Fatalf("the failover client did not write to the new master %s: %v", st.Master.Addr, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("data written before the failover: %q, %v", v, err)
	}
}

// Three sentinels (quorum 2) fail a killed master over to the replica on
// their own: KillMaster returns once all report it, and the failover client
// writes to the new master. A write the replica had received survives; the
// probe that the old master is gone: its address refuses connections.
func TestSentinelsKillMaster(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinels(t, 3)
	if len(st.SentinelAddrs) != 3 {
		t.Fatalf("%d sentinels, want 3", len(st.SentinelAddrs))
	}
	c := st.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Set(ctx, "before", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	old := st.Master.Addr
	if err := st.KillMaster(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st.Master.Addr == old {
		t.Fatal("KillMaster did not swap Master and Replica")
	}
	var err error
	for i := 0; i < 100; i++ { // the failover client moves to the new master
		if err = c.Set(ctx, "after", "v", 0).Err(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
	if v, err := st.Master.Client(t).Get(ctx, "before").Result(); err != nil || v != "v" {
		t.Fatalf("the replicated write on the new master: %q, %v", v, err)
	}
	if err := st.Replica.Client(t).Ping(ctx).Err(); err == nil {
		t.Fatal("probe: the killed master still answers")
	}
}

// A failover the sentinel finished behind the harness's back (here forced
// with SENTINEL FAILOVER directly; in the fault rig, one that outlasted
// Failover's timeout) leaves Master naming the old master until Reconcile.
// Failover reconciles first, so the one after it promotes the server that is
// the replica now, and Master names the server the sentinel reports.
func TestSentinelReconcile(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc := redis.NewSentinelClient(&redis.Options{Addr: st.SentinelAddrs[0]})
	defer sc.Close()
	reported := func() string {
		a, err := sc.GetMasterAddrByName(ctx, st.MasterName).Result()
		if err != nil || len(a) != 2 {
			t.Fatalf("the sentinel's master: %v, %v", a, err)
		}
		return net.JoinHostPort(a[0], a[1])
	}
	if err := st.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	old := st.Master
	// The sentinel announces the promotion on its +switch-master channel.
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	if err := sc.Failover(ctx, st.MasterName).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.ReceiveMessage(ctx); err != nil {
		t.Fatalf("the sentinel did not announce the promotion: %v", err)
	}
	if reported() == old.Addr {
		t.Fatal("the sentinel announced a switch and still reports the old master")
	}
	// Control: the harness has not seen it.
	if st.Master != old {
		t.Fatal("Master changed without Reconcile")
	}
	if err := st.Reconcile(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st.Master.Addr != reported() || st.Replica != old {
		t.Fatalf("after Reconcile: Master %s, Replica %s; the sentinel reports %s", st.Master.Addr, st.Replica.Addr, reported())
	}
	if err := st.Failover(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st.Master != old || reported() != old.Addr {
		t.Fatalf("after Failover: Master %s, the sentinel reports %s; want %s", st.Master.Addr, reported(), old.Addr)
	}
}
