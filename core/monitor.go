package core

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Monitors: while a Locker holds leases it keeps an idle Pub/Sub connection
// to every master it holds them on, and renews every lease at once when that
// connection breaks and comes back, or the node's run id changes, so that a
// lock lost to a restart or a failover is known before its next renewal.
// See docs/internals.md, "Monitors".

// Monitor timings.
const (
	// monitorRetry is how long a monitor waits before it connects again
	// after its connection failed: short, since a lease's loss is seen
	// that long after the node answers again, at most.
	monitorRetry = 25 * time.Millisecond
	// monitorDial bounds one attempt to connect, and one look at the
	// node's run id.
	monitorDial = time.Second
	// monitorEvery is how often an idle monitor connection is pinged and,
	// once the node has answered, the node's run id is read.
	monitorEvery = time.Second
	// monitorScan is how often a Cluster's masters are looked up again
	// (each monitor also does when its connection fails).
	monitorScan = 5 * time.Second
	// recheckFor is how long after a check a failed renewal is retried
	// every monitorRetry.
	recheckFor = 10 * time.Second
)

// startMonitors starts the monitors of every Redis deployment of the
// Locker, for as long as the watchdog runs (w.mu held, the watchdog's
// goroutines starting).
func (w *watchdog) startMonitors(idle chan struct{}) {
	if w.l.mut.noMonitor {
		return
	}
	for _, r := range w.l.waitRooms {
		c := r.client
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			if cc, ok := c.(*redis.ClusterClient); ok {
				w.monitorCluster(idle, cc)
				return
			}
			w.monitor(idle, c, nil)
		}()
	}
}

// monitor keeps a connection to the node behind c until the watchdog stops
// (idle closed or its context ended) or gone is closed, and checks every
// lease (checkNow) each time a connection succeeds after one failed, or
// the node c sends commands to has a run id other than the one it had. A
// server that refuses the subscription (ACL, authentication) is not
// watched: its losses are seen at the next renewal.
func (w *watchdog) monitor(idle chan struct{}, c redis.UniversalClient, gone <-chan struct{}) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	go func() {
		select {
		case <-idle:
		case <-gone:
		case <-ctx.Done():
		}
		cancel()
	}()
	failed := false
	runID := ""
	for {
		err := w.watchOnce(ctx, c, func() {
			if failed {
				failed = false
				w.checkNow()
			}
		}, &runID)
		if ctx.Err() != nil {
			return
		}
		if refusedByServer(err) {
			w.l.logger().Warn("lockgate: cannot watch a Redis node for restarts; a lock lost with it is seen at the next renewal", "error", err)
			return
		}
		failed = true
		t := time.NewTimer(monitorRetry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// watchOnce makes one monitor connection and holds it until it fails (the
// error) or ctx ends. connected is called once the subscription is
// confirmed. The connection is pinged every monitorEvery; with no answer
// for as long again, it counts as failed. After each answer the node's run
// id is read: one other than *runID checks every lease.
func (w *watchdog) watchOnce(ctx context.Context, c redis.UniversalClient, connected func(), runID *string) error {
	dctx, dcancel := context.WithTimeout(ctx, monitorDial)
	ps := c.Subscribe(dctx, w.l.opts.prefix+"monitor")
	defer ps.Close()
	// The client may not bound its reads by ctx: closing the connection
	// ends a read in progress when the monitor stops.
	defer context.AfterFunc(ctx, func() { ps.Close() })()
	_, err := ps.ReceiveTimeout(dctx, monitorDial) // the subscription's confirmation
	dcancel()
	if err != nil {
		return err
	}
	connected()
	w.sameNode(ctx, c, runID)
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(ctx, monitorEvery)
		if err == nil {
			pinged = false
			if _, ok := m.(*redis.Pong); ok {
				w.sameNode(ctx, c, runID)
			}
			continue
		}
		if err = pingOnSilence(ctx, ps, err, &pinged); err == nil {
			continue
		}
		return err
	}
}

// sameNode reads the run id of the node c sends commands to and checks
// every lease if it is not *runID (a first reading only records it).
func (w *watchdog) sameNode(ctx context.Context, c redis.UniversalClient, runID *string) {
	ctx, cancel := context.WithTimeout(ctx, monitorDial)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return
	}
	_, rest, ok := strings.Cut(info, "run_id:")
	if !ok {
		return
	}
	id, _, _ := strings.Cut(rest, "\r\n")
	if *runID != "" && id != *runID {
		w.checkNow()
	}
	*runID = id
}

// monitorCluster runs a monitor for every master of a Cluster, looking the
// masters up again every monitorScan: a master that is no longer one stops
// its monitor, and a new one (a promoted replica) gets one, whose first
// connection checks every lease (the failover may have lost locks).
func (w *watchdog) monitorCluster(idle chan struct{}, cc *redis.ClusterClient) {
	type running struct{ gone chan struct{} }
	nodes := map[string]running{}
	defer func() {
		for _, n := range nodes {
			close(n.gone)
		}
	}()
	first := true
	for {
		seen := map[string]*redis.Client{}
		var mu sync.Mutex
		ctx, cancel := context.WithTimeout(w.ctx, monitorDial)
		err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock() // called for every master at once
			defer mu.Unlock()
			seen[c.Options().Addr] = c
			return nil
		})
		cancel()
		if err == nil {
			for addr, n := range nodes {
				if seen[addr] == nil {
					close(n.gone)
					delete(nodes, addr)
				}
			}
			added := false
			for addr, c := range seen {
				if _, ok := nodes[addr]; ok {
					continue
				}
				n := running{gone: make(chan struct{})}
				nodes[addr] = n
				added = !first
				w.wg.Add(1)
				go func() {
					defer w.wg.Done()
					w.monitor(idle, c, n.gone)
				}()
			}
			if added {
				w.checkNow() // a new master: a failover may have lost locks
			}
			first = false
		}
		t := time.NewTimer(monitorScan)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-idle:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// checkNow makes every renewed hold due for renewal now, and retried soon
// for recheckFor if it fails: a node came back after its connection
// failed, and the locks it held may be gone.
func (w *watchdog) checkNow() {
	w.mu.Lock()
	now := w.l.clock()
	w.recheck = now + int64(recheckFor)
	for _, h := range w.h {
		if h.renews() && !h.abandoned && h.renewAt > now {
			h.renewAt = now
		}
		h.heapKey = next(h)
	}
	heap.Init(&w.h)
	w.mu.Unlock()
	signal(w.kick)
}
