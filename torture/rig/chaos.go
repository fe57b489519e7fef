package rig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/redistest"
)

// chaos injects faults in lanes that run side by side (worker processes,
// one worker's path, the crowd, the Redis processes, the network), each a
// sequence of faults and gaps drawn from its own random stream of the run's
// seed: the schedule (which fault, how long, which target, how long to
// wait) is reproducible from the seed; how it interleaves with the workers
// is real time. The Redis and network lanes leave quiet stretches (half
// their gaps are 0.5–2s), in which the liveness checks apply.
type chaos struct {
	cfg    *RunConfig
	procs  *processes
	dep    *deployment
	cc     *redis.ClusterClient // cluster topology: to find a key's slot
	log    *jsonLog
	mu     sync.Mutex
	counts map[string]int
	// master guards the Sentinel's Master, which a failover swaps while
	// another lane looks for the current master, and lookedAt, when the
	// rig last learnt which node is the master (see reconcile).
	master   sync.Mutex
	lookedAt int64
	movedAt  int64 // when the rig last saw the sentinel's own failover
	// moved, if not nil, is sent the failovers the sentinel made by itself
	// as reconcile logs them (without blocking: tests)
	moved chan Fault
}

// lane is a set of fault kinds injected one after another, with gaps.
type lane struct {
	kinds []string
	quiet bool // half the gaps are long
	gap   [2]time.Duration
}

// lanes returns the lanes of the topology, keeping only enabled kinds.
func (c *chaos) lanes() []lane {
	short := [2]time.Duration{100 * time.Millisecond, 400 * time.Millisecond}
	all := []lane{
		{kinds: []string{FaultPause, FaultKill}, gap: [2]time.Duration{300 * time.Millisecond, time.Second}},
		{kinds: []string{FaultWorkerLatency, FaultSlowReply, FaultCommandLatency}, gap: [2]time.Duration{300 * time.Millisecond, 1500 * time.Millisecond}},
	}
	if c.cfg.Crowd > 0 {
		all = append(all, lane{kinds: []string{FaultKillWaiters}, gap: [2]time.Duration{time.Second, 3 * time.Second}})
	}
	switch c.cfg.Topology {
	case "sentinel":
		all = append(all, lane{kinds: []string{FaultFailover, FaultMasterHang}, quiet: true, gap: short},
			lane{kinds: []string{FaultNodeNet}, quiet: true, gap: short})
	case "redlock":
		all = append(all, lane{kinds: []string{FaultNodeRestart, FaultNodeHang}, quiet: true, gap: short},
			lane{kinds: []string{FaultNodeNet}, quiet: true, gap: short})
	case "cluster":
		all = append(all, lane{kinds: []string{FaultMasterPause, FaultMasterRestart, FaultMigrate}, quiet: true, gap: short},
			lane{kinds: []string{FaultNodeNet}, quiet: true, gap: short})
	default:
		all = append(all, lane{kinds: []string{FaultRestart, FaultHangShort, FaultHangLong}, quiet: true, gap: short},
			lane{kinds: []string{FaultLateReply, FaultCut, FaultLatency}, quiet: true, gap: short})
	}
	var out []lane
	for _, l := range all {
		var kinds []string
		for _, k := range l.kinds {
			if c.cfg.enabled(k) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) > 0 {
			l.kinds = kinds
			out = append(out, l)
		}
	}
	return out
}

// run runs every lane until ctx ends; each fault in progress is undone
// (a paused process resumed) before it returns.
func (c *chaos) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, l := range c.lanes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(i+1)))
			for {
				gap := l.gap[0] + time.Duration(rng.Int64N(int64(l.gap[1]-l.gap[0])))
				if l.quiet && rng.IntN(2) == 0 {
					gap = 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
				}
				if !sleep(ctx, gap) {
					return
				}
				c.inject(ctx, rng, l.kinds[rng.IntN(len(l.kinds))])
			}
		}()
	}
	if c.dep.st != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.watchMaster(ctx)
		}()
	}
	wg.Wait()
	<-ctx.Done() // a run without faults (NoFaults) still runs its workload
}

// masterLook is how often watchMaster asks the sentinel for the master.
const masterLook = 200 * time.Millisecond

// watchMaster asks the sentinel which node is the master every masterLook
// until ctx ends (reconcile), so that a failover the sentinel makes by
// itself is logged over the look before it and the look after it: the
// checker excuses what a failover may lose or keep over that window only,
// not from whenever a Sentinel fault was last drawn.
func (c *chaos) watchMaster(ctx context.Context) {
	every(ctx, masterLook, func() {
		c.master.Lock()
		c.reconcile()
		c.master.Unlock()
	})
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() == nil {
				f()
			}
		}
	}
}

// inject applies one fault and logs it.
func (c *chaos) inject(ctx context.Context, rng *rand.Rand, kind string) {
	f := Fault{Kind: kind, Start: now()}
	rt, ttl := c.cfg.ReadTimeout, c.cfg.TTL
	if ttl == 0 {
		ttl = 500 * time.Millisecond // a pause as long as the common lease's
	}
	frac := func(lo, hi float64) time.Duration { return time.Duration(float64(rt) * (lo + (hi-lo)*rng.Float64())) }
	srvs := c.dep.srvs
	node := rng.IntN(len(srvs))
	var failed error // a fault that could not be applied: not logged
	switch kind {
	case FaultPause:
		f.Target = c.procs.pause(rng.IntN(c.cfg.Workers), time.Duration(float64(ttl)*(1.5+1.5*rng.Float64())))
	case FaultKill:
		// The fault starts when the worker is surely dead: a hold it
		// logged just before counts as held until then.
		f.Target, f.Start = c.procs.kill(rng.IntN(c.cfg.Workers), 0)
	case FaultKillWaiters:
		f.Target, f.Start = c.procs.kill(c.cfg.Workers, c.cfg.CrowdRestart) // the crowd
	case FaultWorkerLatency:
		// One worker's replies slowed, below the read timeout: its path is
		// slow, not down.
		w := rng.IntN(len(c.dep.proxies))
		if c.cfg.Crowd > 0 && rng.IntN(2) == 0 {
			w = c.cfg.Workers // the crowd, half the time: most waits are its
		}
		f.Target, f.D = c.procs.name(w), int64(frac(0.2, 0.6))
		for _, p := range c.dep.proxies[w] {
			p.SetLatency(time.Duration(f.D))
		}
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		for _, p := range c.dep.proxies[w] {
			p.SetLatency(0)
		}
	case FaultSlowReply:
		// One worker's next script reply late, but before its read
		// timeout: the same reply, slow (a grant published meanwhile
		// arrives first, on the worker's Pub/Sub connection).
		w := rng.IntN(len(c.dep.proxies))
		if c.cfg.Crowd > 0 && rng.IntN(2) == 0 {
			w = c.cfg.Workers
		}
		f.Target, f.D = c.procs.name(w), int64(frac(0.3, 0.8))
		var held []*redistest.Hold
		for _, p := range c.dep.proxies[w] {
			held = append(held, p.HoldReply(redistest.MatchCommand("evalsha"), time.Duration(f.D)))
		}
		timeout := time.After(time.Duration(f.D) + 2*time.Second)
		for _, h := range held {
			select {
			case <-h.Released():
			case <-timeout:
			}
		}
	case FaultCommandLatency:
		// One process's command replies late now and then, below the read
		// timeout, while its Pub/Sub connection is untouched: a grant
		// published while a waiter's queueing reply is held arrives first,
		// and waiters queued after it may have joined the room. The
		// crowd's when there is one (a grant early for one of its waiters
		// meets a room subscribed by the others).
		w := rng.IntN(c.cfg.Workers)
		if c.cfg.Crowd > 0 {
			w = c.cfg.Workers
		}
		f.Target, f.D = c.procs.name(w), int64(frac(0.3, 0.8))
		lasting := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		commandLatency(c.dep.proxies[w], rand.New(rand.NewPCG(rng.Uint64(), 0)), time.Duration(f.D), lasting)
	case FaultRestart:
		srvs[0].Restart()
	case FaultHangShort:
		f.Start, f.End, failed = hang(srvs[0], frac(0.3, 0.8))
	case FaultHangLong:
		f.Start, f.End, failed = hang(srvs[0], frac(1.5, 3))
	case FaultLateReply, FaultCut, FaultLatency:
		f.D = network(c.dep.proxiesOf(0), kind, rng, rt, frac)
	case FaultFailover:
		c.master.Lock()
		c.reconcile()
		c.dep.st.Failover(10 * time.Second)
		c.lookedAt = now()
		c.master.Unlock()
	case FaultMasterHang:
		c.master.Lock()
		c.reconcile() // (unanswered: the last known master)
		moved := c.movedAt != 0 && now()-c.movedAt < int64(failoverSettle)
		m := c.dep.st.Master
		c.master.Unlock()
		if moved {
			// The clients may still be on the old master: busy answers
			// from it would be judged as a hung Redis's.
			failed = errors.New("the sentinel has just failed the master over")
			break
		}
		f.Target = m.Addr
		f.Start, f.End, failed = c.hangMaster(m, frac(0.5, 2))
	case FaultNodeRestart:
		// Killed, and started empty the longest lease later: redis.io's
		// "delayed restart" for a Redlock master without persistence, so
		// that every lock it granted has expired before it grants again.
		f.Target = srvs[node].Addr
		srvs[node].Stop()
		time.Sleep(longestLease(c.cfg) + 100*time.Millisecond)
		srvs[node].Restart()
	case FaultNodeHang:
		f.Target = srvs[node].Addr
		f.Start, f.End, failed = hang(srvs[node], frac(0.3, 3))
	case FaultNodeNet:
		if c.dep.st != nil {
			c.master.Lock()
			c.reconcile()
			node = 0
			if c.dep.st.Master == srvs[1] {
				node = 1
			}
			c.master.Unlock()
		}
		f.Target = srvs[node].Addr
		f.D = network(c.dep.proxiesOf(node), []string{FaultLateReply, FaultCut, FaultLatency}[rng.IntN(3)], rng, rt, frac)
	case FaultMasterPause:
		f.Target = srvs[node].Addr
		f.Start, f.End, failed = hang(srvs[node], frac(0.3, 2))
	case FaultMasterRestart:
		f.Target = srvs[node].Addr
		srvs[node].Restart()
		c.dep.cluster.WaitReady(10 * time.Second)
	case FaultMigrate:
		key := fmt.Sprintf("lockgate:{k%d}", rng.IntN(max(c.cfg.Hot, 1)))
		slot := int(c.cc.ClusterKeySlot(ctx, key).Val())
		from := c.dep.cluster.ServerForSlot(slot)
		to := rng.IntN(len(srvs))
		if srvs[to] == from {
			to = (to + 1) % len(srvs)
		}
		f.Target = srvs[to].Addr
		c.dep.cluster.MigrateSlot(slot, to, 10*time.Second)
	}
	if f.End == 0 { // (a hang knows its end: the resume)
		f.End = now()
	}
	if failed != nil {
		// Logged, a hang that did not take would be judged as one: busy
		// answers during it as answers of a hung Redis.
		fmt.Fprintf(os.Stderr, "rig: %s not applied: %v\n", kind, failed)
		return
	}
	c.log.add(f, true)
	c.mu.Lock()
	c.counts[kind]++
	c.mu.Unlock()
}

// reconcile asks the sentinel which node is the master (c.master held).
// If it moved since the rig last knew, without a forced failover, the
// sentinel failed the master over by itself (it answered no PING for the
// sentinel's down-after: paused, or hangs in a row): that is logged as a
// failover from the last look to now, so that the checker allows what any
// failover may lose or keep, and remembered (movedAt). Not counted as an
// injected fault.
func (c *chaos) reconcile() {
	before, asked := c.dep.st.Master, now()
	if c.dep.st.Reconcile(time.Second) != nil {
		return
	}
	moved := c.dep.st.Master != before && c.lookedAt != 0
	if moved {
		fmt.Fprintf(os.Stderr, "rig: the sentinel failed the master over by itself, to %s\n", c.dep.st.Master.Addr)
		c.movedAt = now()
		f := Fault{Kind: FaultFailover, Target: "by the sentinel", Start: c.lookedAt, End: c.movedAt}
		c.log.add(f, true)
		select {
		case c.moved <- f:
		default:
		}
	}
	c.lookedAt = asked // the master it names was so when it was asked
}

// network applies one network fault of kind to the proxies of a server
// (every worker's): the next script's reply to each worker held two read
// timeouts (rt), every connection cut, or latency on every reply. It returns
// the latency added, if any.
func network(ps []*redistest.Proxy, kind string, rng *rand.Rand, rt time.Duration, frac func(lo, hi float64) time.Duration) int64 {
	switch kind {
	case FaultLateReply:
		// Each proxy's next script reply within one read timeout (a proxy
		// that carries none meanwhile, as a Cluster master owning none of a
		// small run's keys, holds nothing: its hold matches nothing later),
		// until every held reply is let go, 3 read timeouts at most.
		until := time.Now().Add(rt)
		evalsha := redistest.MatchCommand("evalsha")
		match := func(cmd []string) bool { return time.Now().Before(until) && evalsha(cmd) }
		var held []*redistest.Hold
		for _, p := range ps {
			held = append(held, p.HoldReply(match, 2*rt))
		}
		timeout := time.After(3 * rt)
	wait:
		for _, h := range held {
			select {
			case <-h.Released():
			case <-timeout:
				break wait
			}
		}
	case FaultCut:
		for _, p := range ps {
			p.Cut()
		}
	case FaultLatency:
		d := time.Duration(20+rng.IntN(60)) * time.Millisecond
		for _, p := range ps {
			p.SetLatency(d)
		}
		time.Sleep(frac(1, 2.5))
		for _, p := range ps {
			p.SetLatency(0)
		}
		return int64(d)
	}
	return 0
}

// commandLatency holds command replies on ps for d, one in three (drawn
// from rng), for a while: replies on the process's other connections
// overtake a held one, as a slow moment of one connection lets them. A
// Pub/Sub connection's messages are never held (the proxy passes them
// through), nor its subscriptions, nor any connection's handshake.
func commandLatency(ps []*redistest.Proxy, rng *rand.Rand, d, lasting time.Duration) {
	var on atomic.Bool
	on.Store(true)
	var mu sync.Mutex // guards rng
	match := func(cmd []string) bool {
		if !on.Load() || len(cmd) == 0 {
			return false
		}
		switch strings.ToUpper(cmd[0]) {
		case "SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE", "MONITOR", "HELLO", "AUTH", "CLIENT", "SELECT":
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(3) == 0
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// One hold at a time, so that each command is drawn once;
				// the next is set as soon as a command takes this one.
				select {
				case <-p.HoldReply(match, d).Matched():
				case <-stop:
					return // the hold left waits for a command it never matches (on is false)
				}
			}
		}()
	}
	time.Sleep(lasting)
	on.Store(false)
	close(stop)
	wg.Wait()
}

// hang pauses s for d and returns when the pause began, once SIGSTOP was
// sent, not when the fault was drawn (finding a Sentinel's master first
// can take a while on a loaded machine, and Redis answers meanwhile), and
// when it ended, once s resumed; or the pause's error (inject then logs no
// fault).
func hang(s *redistest.Server, d time.Duration) (start, end int64, err error) {
	if err := s.Pause(); err != nil {
		return 0, 0, err
	}
	start = now()
	time.Sleep(d)
	s.Resume()
	return start, now(), nil
}

// hangMaster hangs m, the sentinel's master, for d, and returns when the
// hang started and ended (m resumed). It fails if the master moved
// meanwhile: a failover the sentinel had begun before the hang (after hangs
// or cuts in a row) may end during it, and the clients then move to the new
// master, whose busy answers are no hung Redis's. The reconcile after the
// hang logs that failover.
func (c *chaos) hangMaster(m *redistest.Server, d time.Duration) (start, end int64, err error) {
	if start, end, err = hang(m, d); err != nil {
		return 0, 0, err
	}
	c.master.Lock()
	defer c.master.Unlock()
	c.reconcile()
	if c.dep.st.Master != m {
		return 0, 0, errors.New("the sentinel failed the master over during the hang")
	}
	return start, end, nil
}

func (c *chaos) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
