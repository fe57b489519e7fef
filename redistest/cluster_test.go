package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// TestClusterServesKeysOnEveryNode writes, through one cluster client, a
// key owned by each node and reads it back both through the cluster client
// and straight from the node that owns its slot.
func TestClusterServesKeysOnEveryNode(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// One key per node: a few dozen names cover all three slot ranges.
	keyOf := map[*redistest.Server]string{}
	for i := 0; i < 1000 && len(keyOf) < len(cl.Servers); i++ {
		k := fmt.Sprintf("k%d", i)
		slot, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if s := cl.ServerForSlot(int(slot)); s != nil && keyOf[s] == "" {
			keyOf[s] = k
		}
	}
	if len(keyOf) != len(cl.Servers) {
		t.Fatalf("found keys for %d of %d nodes", len(keyOf), len(cl.Servers))
	}
	for s, k := range keyOf {
		if err := cc.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s through the cluster client: %v", k, err)
		}
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != "v-"+k {
			t.Fatalf("GET %s through the cluster client: %q, %v", k, v, err)
		}
		nc := s.Client(t)
		if v, err := nc.Get(ctx, k).Result(); err != nil || v != "v-"+k {
			t.Fatalf("GET %s on its node %s: %q, %v", k, s.Addr, v, err)
		}
		// Control: every other node redirects instead of serving the key.
		for _, o := range cl.Servers {
			if o == s {
				continue
			}
			if err := o.Client(t).Get(ctx, k).Err(); err == nil || err == redis.Nil {
				t.Fatalf("GET %s on %s, which does not own its slot: %v, want MOVED", k, o.Addr, err)
			}
		}
	}
}

// TestClusterNodeRestartRejoins restarts one node: it comes back with its
// identity and slots, and the cluster is healthy again.
func TestClusterNodeRestartRejoins(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	if err := cl.Servers[1].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	cc := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
}

func TestNewClusterRejectsFewerThanThreeMasters(t *testing.T) {
	t.Parallel()
	if c, err := redistest.NewCluster(2); err == nil {
		c.Close()
		t.Fatal("NewCluster(2) succeeded")
	}
}

// MigrateSlot moves a slot with its keys to another master while a client
// works: the key is read back through the cluster client afterwards, the
// new master serves it, and a subscriber of the slot's shard channel on the
// old master is unsubscribed by the server (what a waiter's connection must
// follow). Control: before the move the old master served it.
func TestClusterMigrateSlot(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	ctx := context.Background()
	const key = "{mig}:k"
	slot := int(cc.ClusterKeySlot(ctx, key).Val())
	from := c.ServerForSlot(slot)
	if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	sub := redis.NewClient(from.Options())
	defer sub.Close()
	ps := sub.SSubscribe(ctx, "{mig}:ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	to := 0
	for i, s := range c.Servers {
		if s != from {
			to = i
			break
		}
	}
	if err := c.MigrateSlot(slot, to, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.ServerForSlot(slot); got != c.Servers[to] || got == from {
		t.Fatalf("slot %d on %v after the move, want %s", slot, got, c.Servers[to].Addr)
	}
	if v, err := cc.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET after the move = %q, %v", v, err)
	}
	nc := redis.NewClient(c.Servers[to].Options())
	defer nc.Close()
	if n, err := nc.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("the new master has the key: %d, %v", n, err)
	}
	m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("no message on the old master's subscription after the move: %v", err)
	}
	if s, ok := m.(*redis.Subscription); !ok || s.Kind != "sunsubscribe" || s.Channel != "{mig}:ch" {
		t.Fatalf("after the move the old master sent %#v, want sunsubscribe of {mig}:ch", m)
	}
}

// KillMaster promotes the killed master's replica: a write made before,
// once replicated, is read through a fresh cluster client from the new
// master, which serves the slot. Controls: before the kill the replica
// reports role slave, and afterwards the killed node refuses connections.
func TestClusterKillMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	if err := cl.AddReplicas(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cc := cl.Client(t)
	k := ""
	for i := 0; i < 1000 && k == ""; i++ {
		slot, err := cc.ClusterKeySlot(ctx, fmt.Sprintf("k%d", i)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if cl.ServerForSlot(int(slot)) == cl.Servers[0] {
			k = fmt.Sprintf("k%d", i)
		}
	}
	if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old, replica := cl.Servers[0], cl.Replicas[0]
	if role, _ := replica.Client(t).Do(ctx, "role").Slice(); len(role) == 0 || role[0] != "slave" {
		t.Fatalf("control: replica's role before the kill %v, want slave", role)
	}
	if n, err := old.Client(t).Do(ctx, "wait", 1, 5000).Int64(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	if err := cl.KillMaster(0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if cl.Servers[0] != replica || cl.Replicas[0] != old || cl.Addrs[0] != replica.Addr {
		t.Fatal("KillMaster did not swap the master and its replica")
	}
	if v, err := cl.Client(t).Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s on the new master through a fresh cluster client: %q, %v", k, v, err)
	}
	if err := old.Client(t).Ping(ctx).Err(); err == nil {
		t.Fatal("control: the killed master still answers")
	}
}
