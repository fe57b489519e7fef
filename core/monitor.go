package core

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Monitor timings. Monitors renew every lease at once when a node restarts or
// fails over: see docs/internals.md, "Monitors".
const (
	// monitorRetry: wait before reconnecting (a loss is seen at most this late)
	monitorRetry = 25 * time.Millisecond
	// monitorDial bounds one connection attempt and one run id read
	monitorDial = time.Second
	// monitorEvery: how often an idle connection is pinged and the run id read
	monitorEvery = time.Second
	// monitorScan: how often a Cluster's masters are looked up again
	monitorScan = 5 * time.Second
	// recheckFor: how long after a check failed renewals retry every monitorRetry
	recheckFor = 10 * time.Second
)

// startMonitors starts a monitor per Redis deployment for as long as the
// watchdog runs (w.mu held).
func (w *watchdog) startMonitors(ctx context.Context) {
	if w.l.mut.noMonitor {
		return
	}
	for _, r := range w.l.waitRooms {
		c := r.client
		w.wg.Go(func() {
			if cc, ok := c.(*redis.ClusterClient); ok {
				w.monitorCluster(ctx, cc)
				return
			}
			w.monitor(ctx, c)
		})
	}
}

// monitor watches the node behind c until ctx ends, and checks every lease (checkNow) on a reconnection or a new run
// id. A server that refuses the subscription (ACL, auth) is not watched.
func (w *watchdog) monitor(ctx context.Context, c redis.UniversalClient) {
	runID := ""
	for failed := false; ; failed = true {
		err := w.watchOnce(ctx, c, failed, &runID)
		if ctx.Err() != nil {
			return
		}
		if refusedByServer(err) {
			w.l.logger().Warn("lockgate: cannot watch a Redis node for restarts; a lock lost with it is seen at the next renewal", "error", err)
			return
		}
		sleepCtx(ctx, monitorRetry)
	}
}

// watchOnce holds one monitor connection until it fails (the error) or ctx
// ends; once subscribed after an earlier one failed (a reconnection), it
// checks every lease. It pings every monitorEvery (failed after as long
// again unanswered) and calls sameNode on each answer.
func (w *watchdog) watchOnce(ctx context.Context, c redis.UniversalClient, failed bool, runID *string) error {
	dctx, dcancel := context.WithTimeout(ctx, monitorDial)
	ps := c.Subscribe(dctx, w.l.opts.prefix+"monitor")
	defer ps.Close()
	// Closing the connection ends a read that the client does not bound by ctx.
	defer context.AfterFunc(ctx, func() { ps.Close() })()
	_, err := ps.ReceiveTimeout(dctx, monitorDial) // the subscription's confirmation
	dcancel()
	if err != nil {
		return err
	}
	if failed {
		w.checkNow()
	}
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

// sameNode reads c's node's run id and checks every lease if it changed.
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

// monitorCluster runs a monitor per Cluster master, looked up every
// monitorScan; a new master (a failover) checks every lease.
func (w *watchdog) monitorCluster(ctx context.Context, cc *redis.ClusterClient) {
	nodes := map[string]context.CancelFunc{} // by address: ends its monitor
	defer func() {
		for _, stop := range nodes {
			stop()
		}
	}()
	first := true
	for {
		seen := map[string]*redis.Client{}
		var mu sync.Mutex
		lctx, cancel := context.WithTimeout(ctx, monitorDial)
		err := cc.ForEachMaster(lctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock() // called for every master at once
			defer mu.Unlock()
			seen[c.Options().Addr] = c
			return nil
		})
		cancel()
		if err == nil {
			for addr, stop := range nodes {
				if seen[addr] == nil {
					stop()
					delete(nodes, addr)
				}
			}
			added := false
			for addr, c := range seen {
				if _, ok := nodes[addr]; ok {
					continue
				}
				nctx, stop := context.WithCancel(ctx)
				nodes[addr] = stop
				added = !first
				w.wg.Go(func() { w.monitor(nctx, c) })
			}
			if added {
				w.checkNow()
			}
			first = false
		}
		if !sleepCtx(ctx, monitorScan) {
			return
		}
	}
}

// checkNow makes every renewed hold due now, retried often for recheckFor:
// a node came back, and the locks it held may be gone.
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
