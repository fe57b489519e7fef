package rig

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockgate/lockgate/redistest"
)

// chaos injects faults in lanes that run side by side (worker processes,
// the Redis process, the network), each a sequence of faults and gaps drawn
// from its own random stream of the run's seed: the schedule (which fault,
// how long, which target, how long to wait) is reproducible from the seed;
// how it interleaves with the workers is real time.
type chaos struct {
	cfg     *RunConfig
	procs   *processes
	srvs    []*redistest.Server // single topology: one; redlock: the masters
	proxies []*redistest.Proxy  // in front of srvs[i]
	st      *redistest.Sentinel // sentinel topology
	log     *jsonLog
	mu      sync.Mutex
	counts  map[string]int
}

// lanes returns the fault kinds of each lane for the topology, keeping
// only those enabled.
func (c *chaos) lanes() [][]string {
	var all [][]string
	if c.st != nil {
		all = [][]string{{FaultPause, FaultKill}, {FaultFailover, FaultMasterHang}}
	} else if len(c.srvs) > 1 {
		all = [][]string{{FaultPause, FaultKill}, {FaultNodeRestart, FaultNodeHang}, {FaultNodeNet}}
	} else {
		all = [][]string{{FaultPause, FaultKill}, {FaultRestart, FaultHangShort, FaultHangLong}, {FaultLateReply, FaultCut, FaultLatency}}
	}
	var out [][]string
	for _, lane := range all {
		var kinds []string
		for _, k := range lane {
			if c.cfg.enabled(k) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) > 0 {
			out = append(out, kinds)
		}
	}
	return out
}

// run runs every lane until ctx ends; each fault in progress is undone
// (a paused process resumed) before it returns.
func (c *chaos) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, kinds := range c.lanes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(i+1)))
			for {
				gap := time.Duration(100+rng.IntN(300)) * time.Millisecond
				if !sleep(ctx, gap) {
					return
				}
				kind := kinds[rng.IntN(len(kinds))]
				c.inject(ctx, rng, kind)
			}
		}()
	}
	wg.Wait()
}

// inject applies one fault and logs it.
func (c *chaos) inject(ctx context.Context, rng *rand.Rand, kind string) {
	f := Fault{Kind: kind, Start: now()}
	rt, ttl := c.cfg.ReadTimeout, c.cfg.TTL
	frac := func(lo, hi float64) time.Duration { return time.Duration(float64(rt) * (lo + (hi-lo)*rng.Float64())) }
	switch kind {
	case FaultPause:
		f.Target = c.procs.pause(rng.IntN(c.cfg.Workers), time.Duration(float64(ttl)*(1.5+1.5*rng.Float64())))
	case FaultKill:
		f.Target = c.procs.kill(rng.IntN(c.cfg.Workers))
	case FaultRestart:
		c.srvs[0].Restart()
	case FaultHangShort:
		hang(c.srvs[0], frac(0.3, 0.8))
	case FaultHangLong:
		hang(c.srvs[0], frac(1.5, 3))
	case FaultLateReply, FaultCut, FaultLatency:
		network(c.proxies[0], kind, rng, rt, frac)
	case FaultFailover:
		c.st.Failover(10 * time.Second)
	case FaultMasterHang:
		hang(c.st.Master, frac(0.5, 2))
	case FaultNodeRestart:
		// Killed, and started empty a TTL later: redis.io's "delayed
		// restart" for a Redlock master without persistence, so that every
		// lock it granted has expired before it grants again.
		n := rng.IntN(len(c.srvs))
		f.Target = c.srvs[n].Addr
		c.srvs[n].Stop()
		time.Sleep(ttl + 100*time.Millisecond)
		c.srvs[n].Restart()
	case FaultNodeHang:
		n := rng.IntN(len(c.srvs))
		f.Target = c.srvs[n].Addr
		hang(c.srvs[n], frac(0.3, 3))
	case FaultNodeNet:
		n := rng.IntN(len(c.proxies))
		f.Target = c.srvs[n].Addr
		network(c.proxies[n], []string{FaultLateReply, FaultCut, FaultLatency}[rng.IntN(3)], rng, rt, frac)
	}
	f.End = now()
	c.log.add(f, true)
	c.mu.Lock()
	c.counts[kind]++
	c.mu.Unlock()
}

// network applies one network fault of kind through p: the next script's
// reply held two read timeouts (rt), every connection cut, or latency.
func network(p *redistest.Proxy, kind string, rng *rand.Rand, rt time.Duration, frac func(lo, hi float64) time.Duration) {
	switch kind {
	case FaultLateReply:
		h := p.HoldReply(redistest.MatchCommand("evalsha"), 2*rt)
		select {
		case <-h.Released():
		case <-time.After(3 * rt):
		}
	case FaultCut:
		p.Cut()
	case FaultLatency:
		p.SetLatency(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		time.Sleep(frac(1, 2.5))
		p.SetLatency(0)
	}
}

func hang(s *redistest.Server, d time.Duration) {
	if s.Pause() == nil {
		time.Sleep(d)
		s.Resume()
	}
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
