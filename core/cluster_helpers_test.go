package core_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// nodeLease is a lease and the Cluster master its lock is on.
type nodeLease struct {
	s    *core.Lease
	node *redistest.Server
}

// namesPerNode returns n lock names ("<prefix>:<i>") on each master of cl.
func namesPerNode(t *testing.T, cl *redistest.Cluster, c *redis.ClusterClient, prefix string, n int) map[*redistest.Server][]string {
	t.Helper()
	ctx := locktest.Context(t)
	names := map[*redistest.Server][]string{}
	found := 0
	for i := 0; found < n*len(cl.Servers) && i < 1000; i++ {
		name := fmt.Sprintf("%s:%d", prefix, i)
		slot, err := c.ClusterKeySlot(ctx, "lockgate:{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if node := cl.ServerForSlot(int(slot)); node != nil && len(names[node]) < n {
			names[node] = append(names[node], name)
			found++
		}
	}
	if found != n*len(cl.Servers) {
		t.Fatalf("found %d names, want %d on each of %d masters", found, n, len(cl.Servers))
	}
	return names
}

// lockPerNode locks n names on each master of cl through l.
func lockPerNode(t *testing.T, cl *redistest.Cluster, c *redis.ClusterClient, l *core.Locker, prefix string, n int, opts ...core.LockOption) []nodeLease {
	t.Helper()
	ctx := locktest.Context(t)
	var leases []nodeLease
	for node, names := range namesPerNode(t, cl, c, prefix, n) {
		for _, name := range names {
			s, err := l.Lock(ctx, name, opts...)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, nodeLease{s, node})
		}
	}
	return leases
}

// lostWithNode checks that the leases on node have ended and the others
// have not, and unlocks them.
func lostWithNode(t *testing.T, leases []nodeLease, node *redistest.Server, why string) {
	t.Helper()
	for _, h := range leases {
		select {
		case <-h.s.Done():
			if h.node != node {
				t.Errorf("lease %s on another master lost: %v", h.s.Key(), context.Cause(h.s.Context()))
			}
		default:
			if h.node == node {
				t.Errorf("probe: lease %s on the master %s lives on", h.s.Key(), why)
			}
		}
	}
	for _, h := range leases {
		h.s.Unlock(context.Background())
	}
}
