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
	if c, err := redistest.NewCluster(2); err == nil {
		c.Close()
		t.Fatal("NewCluster(2) succeeded")
	}
}
