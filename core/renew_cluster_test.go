package core_test

import (
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
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	hung := cl.Servers[0]
	leases := lockPerNode(t, cl, c, l, "renew", 3, core.WithTTL(900*time.Millisecond)) // renewed every 300ms: room for a loaded machine
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1400 * time.Millisecond) // the fault: past the leases' validity, under the 2s node timeout
	if err := hung.Resume(); err != nil {
		t.Fatal(err)
	}
	lostWithNode(t, leases, hung, "hung 1.4s")
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
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	hung := cl.Servers[0]

	// Two names on the hung master, then two on each healthy one.
	names := namesPerNode(t, cl, c, "sender", 2)
	order := []*redistest.Server{hung}
	for _, s := range cl.Servers {
		if s != hung {
			order = append(order, s)
		}
	}
	var leases []nodeLease
	for _, node := range order {
		for _, name := range names[node] {
			s, err := l.Lock(ctx, name, core.WithTTL(900*time.Millisecond)) // renewed every 300ms
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, nodeLease{s, node})
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
	lostWithNode(t, leases, hung, "hung 1.4s")
}
