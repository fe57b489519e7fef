package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// On a Cluster with one master hung (SIGSTOP, shorter than the cluster's
// node timeout so the others keep serving), leases on the healthy masters
// are renewed on time (before: one pipeline over every node was waited for
// as a whole, and they were declared lost with the hung node's). The probe:
// the leases on the hung master are lost.
func TestClusterRenewalsPerNode(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	hung := cl.Servers[0]

	type held struct {
		s    *core.Lease
		node *redistest.Server
	}
	var leases []held
	perNode := map[*redistest.Server]int{}
	for i := 0; len(leases) < 9 && i < 1000; i++ {
		name := fmt.Sprintf("renew:%d", i)
		slot, err := c.ClusterKeySlot(ctx, "lockgate:{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		node := cl.ServerForSlot(int(slot))
		if node == nil || perNode[node] == 3 {
			continue
		}
		s, err := l.Lock(ctx, name, core.WithTTL(900*time.Millisecond)) // renewed every 300ms: room for a loaded machine
		if err != nil {
			t.Fatal(err)
		}
		perNode[node]++
		leases = append(leases, held{s, node})
	}
	if len(leases) != 9 {
		t.Fatalf("found keys for %d leases, want 3 on each of 3 masters", len(leases))
	}
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1400 * time.Millisecond) // the fault: past the leases' validity, under the 2s node timeout
	if err := hung.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, h := range leases {
		select {
		case <-h.s.Done():
			if h.node != hung {
				t.Errorf("lease %s on a healthy master lost: %v", h.s.Key(), context.Cause(h.s.Context()))
			}
		default:
			if h.node == hung {
				t.Errorf("probe: lease %s on the hung master survived 1.4s without renewals", h.s.Key())
			}
		}
	}
	for _, h := range leases {
		h.s.Unlock(ctx)
	}
}

// On a Cluster a sender of the watchdog waits for no node's round trip:
// each node's part of a batch goes on a goroutine of its own. Before, a
// sender sent the first part of its batch itself; with leases locked 20ms
// apart (renewed in batches of one), the renewals of the hung master's two
// leases, due first, took both senders for the client's read timeout (1s),
// and every lease on the healthy masters, due behind them, was lost
// (TestClusterRenewalsPerNode lost them so in about one run of three). The
// probe: the leases on the hung master are lost.
func TestClusterHungNodeHoldsUpNoSender(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	hung := cl.Servers[0]

	// Two names on the hung master, then two on each healthy one.
	names := map[*redistest.Server][]string{}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("sender:%d", i)
		slot, err := c.ClusterKeySlot(ctx, "lockgate:{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if node := cl.ServerForSlot(int(slot)); node != nil && len(names[node]) < 2 {
			names[node] = append(names[node], name)
		}
	}
	order := []*redistest.Server{hung}
	for _, s := range cl.Servers {
		if s != hung {
			order = append(order, s)
		}
	}
	type held struct {
		s    *core.Lease
		node *redistest.Server
	}
	var leases []held
	for _, node := range order {
		if len(names[node]) != 2 {
			t.Fatalf("found %d names on %s, want 2", len(names[node]), node.Addr)
		}
		for _, name := range names[node] {
			s, err := l.Lock(ctx, name, core.WithTTL(900*time.Millisecond)) // renewed every 300ms
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, held{s, node})
			time.Sleep(20 * time.Millisecond) // renewals due more than 10ms apart: one batch each
		}
	}
	if err := hung.Pause(); err != nil { // before the first renewal, due 300ms after the first Lock
		t.Fatal(err)
	}
	time.Sleep(1400 * time.Millisecond) // past the leases' validity, under the 2s node timeout
	if err := hung.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, h := range leases {
		select {
		case <-h.s.Done():
			if h.node != hung {
				t.Errorf("lease %s on a healthy master lost: %v", h.s.Key(), context.Cause(h.s.Context()))
			}
		default:
			if h.node == hung {
				t.Errorf("probe: lease %s on the hung master survived 1.4s without renewals", h.s.Key())
			}
		}
	}
	for _, h := range leases {
		h.s.Unlock(ctx)
	}
}
