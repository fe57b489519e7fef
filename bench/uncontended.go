package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrencies of the uncontended benchmark.
var uncontendedConc = []int{1, 16, 64}

// uncResult is one uncontended run: conc goroutines, each cycling Lock then
// Unlock (for the floor: SET NX PX then compare-and-delete) on a key of its
// own that is new every cycle, for the run's duration, on one instance (one
// client) of the configuration.
type uncResult struct {
	Cycles  int64
	Elapsed time.Duration
	// Rate is cycles per second over all goroutines.
	Rate float64
	// P50, P99 are of one cycle's latency (lock + unlock).
	P50, P99 time.Duration
	// Allocs is runtime.MemStats.Mallocs over the run ÷ cycles: the
	// library's allocations, its client's, and one of the harness (the key
	// string); background goroutines' too.
	Allocs float64
	// KeysLeft is the keys on the servers after the run (warm-up included)
	// ÷ the cycles: what a lock leaves behind to expire later.
	KeysLeft float64
	// ServerCmds is the commands the servers ran per cycle (INFO
	// commandstats calls, a script's own commands included); ServerTime
	// the time they took, µs per cycle (INFO commandstats usec of the
	// commands the client sent: serverTime); ServerCPU the servers' CPU
	// time per cycle, µs (INFO cpu, user and system: network I/O too).
	ServerCmds, ServerTime, ServerCPU float64
	Errors                            int64
	FirstErr                          string
}

// runUncontended runs p at concurrency conc for d, after a warm-up of
// warm (connections dialled, scripts loaded) that is not measured.
func runUncontended(ctx context.Context, e *env, p peer, conc int, d, warm time.Duration, tag string) (uncResult, error) {
	lk, err := p.open(e, 0, nil)
	if err != nil {
		return uncResult{}, err
	}
	defer lk.close()

	hs := make([]hist, conc)
	counts := make([]int64, conc)
	errs := make([]int64, conc)
	firstErr := make([]error, conc)

	var warmCycles atomic.Int64
	phase := func(name string, d time.Duration, measure bool) (time.Duration, uint64) {
		var stop atomic.Bool
		begin := make(chan struct{})
		var wg sync.WaitGroup
		for g := range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 0, 96)
				buf = append(buf, fmt.Sprintf("bench:u:%s:%s:%d:", tag, name, g)...)
				plen := len(buf)
				h := &hs[g]
				<-begin
				for i := 0; !stop.Load(); i++ {
					buf = strconv.AppendInt(buf[:plen], int64(i), 10)
					key := string(buf)
					t0 := time.Now()
					err := lk.do(ctx, key, 0, nil)
					if !measure {
						warmCycles.Add(1)
						continue
					}
					h.record(time.Since(t0))
					counts[g]++
					if err != nil {
						errs[g]++
						if firstErr[g] == nil {
							firstErr[g] = err
						}
					}
				}
			}()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mallocs := ms.Mallocs
		t0 := startFor(ctx, begin, d)
		stop.Store(true)
		wg.Wait()
		elapsed := time.Since(t0)
		runtime.ReadMemStats(&ms)
		return elapsed, ms.Mallocs - mallocs
	}

	phase("warm", warm, false)
	before, err := e.serverUse(ctx, e.of(p))
	if err != nil {
		return uncResult{}, err
	}
	elapsed, mallocs := phase("run", d, true)
	after, err := e.serverUse(ctx, e.of(p))
	if err != nil {
		return uncResult{}, err
	}

	var r uncResult
	var all hist
	for g := range conc {
		r.Cycles += counts[g]
		r.Errors += errs[g]
		if firstErr[g] != nil && r.FirstErr == "" {
			r.FirstErr = firstErr[g].Error()
		}
		all.merge(&hs[g])
	}
	r.Elapsed = elapsed
	r.Rate = float64(r.Cycles) / elapsed.Seconds()
	r.P50, r.P99 = all.quantile(0.50), all.quantile(0.99)
	r.Allocs = float64(mallocs) / float64(max(r.Cycles, 1))
	cycles := float64(max(r.Cycles, 1))
	r.ServerCmds = float64(after.calls.delta(before.calls).total()) / cycles
	r.ServerTime = float64(after.usec.delta(before.usec).serverTime(p.topLevel)) / cycles
	r.ServerCPU = (after.cpu - before.cpu) * 1e6 / cycles
	keys, err := e.keys(ctx, e.of(p))
	if err != nil {
		return r, err
	}
	r.KeysLeft = float64(keys) / float64(max(r.Cycles+warmCycles.Load(), 1))
	return r, ctx.Err()
}

// serverUse is what the servers cs have done so far: INFO commandstats
// (calls and usec per command) and INFO cpu (seconds).
type serverUse struct {
	calls, usec cmdStats
	cpu         float64
}

func (e *env) serverUse(ctx context.Context, cs []*redis.Client) (u serverUse, err error) {
	if u.calls, err = e.commandStats(ctx, cs); err != nil {
		return u, err
	}
	if u.usec, err = e.commandUsec(ctx, cs); err != nil {
		return u, err
	}
	u.cpu, err = e.serversCPU(ctx, cs)
	return u, err
}
