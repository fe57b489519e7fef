package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The names benchmark: a flash sale of many users each takes a lock of its
// own name once. It asks whether a lock's cost grows with the number of
// distinct names ever locked, and what they leave in Redis.
const (
	// DefaultNames is how many distinct names one run locks, once each.
	DefaultNames = 1_000_000
	// namesConc is the run's concurrency.
	namesConc = 16
	// namesWindow is the number of cycles each of the two rates is
	// measured over: the early one after namesEarly names were locked, the
	// late one over the run's last cycles.
	namesWindow = 50_000
	namesEarly  = 1_000
)

// namesPeers are the lockers the names benchmark runs: the floor, lockgate
// and the peer that leaves nothing behind either.
var namesPeers = []string{"floor", "lockgate", "redislock"}

type namesJob struct {
	name string
	peer peer
	runs []namesResult
}

// namesResult is one names run: Names distinct names locked and released
// once each by namesConc goroutines.
type namesResult struct {
	Names int
	// Early and Late are cycles/s over the cycles after the first
	// namesEarly and over the last ones (namesWindow each, or a tenth of
	// the run when it is shorter).
	Early, Late float64
	// EarlyCPU and LateCPU are the server's CPU time (INFO cpu, user and
	// system) per cycle over the same cycles, µs: what the scheduling noise
	// of a shared machine moves least.
	EarlyCPU, LateCPU float64
	// Memory is used_memory after the run minus before it (bytes), Keys
	// the keys left.
	Memory, Keys int64
	Errors       int64
	FirstErr     string
}

// runNames locks names distinct names once each with p.
func runNames(ctx context.Context, e *env, p peer, names int, tag string) (namesResult, error) {
	lk, err := p.open(e, 0, nil)
	if err != nil {
		return namesResult{}, err
	}
	defer lk.close()
	before, err := e.usedMemory(ctx)
	if err != nil {
		return namesResult{}, err
	}
	window := min(namesWindow, names/10)
	early := min(namesEarly, names/10)
	marks := []int64{int64(early), int64(early + window), int64(names - window), int64(names)}
	stamps := make([]time.Time, len(marks))
	cpu := make([]float64, len(marks))
	var cpuErr atomic.Value
	var next, done, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range namesConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := []byte("bench:n:" + tag + ":")
			plen := len(buf)
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(names) {
					return
				}
				buf = strconv.AppendInt(buf[:plen], i, 10)
				if err := lk.do(ctx, string(buf), 0, nil); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				n := done.Add(1)
				for m, at := range marks {
					if n == at { // one goroutine reaches each mark
						stamps[m] = time.Now()
						c, err := e.serverCPU(ctx)
						if err != nil {
							cpuErr.CompareAndSwap(nil, err)
						}
						cpu[m] = c
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return namesResult{}, err
	}
	if err, ok := cpuErr.Load().(error); ok {
		return namesResult{}, err
	}
	r := namesResult{Names: names, Errors: errs.Load()}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstErr = s
	}
	r.Early = float64(window) / stamps[1].Sub(stamps[0]).Seconds()
	r.Late = float64(window) / stamps[3].Sub(stamps[2]).Seconds()
	r.EarlyCPU = (cpu[1] - cpu[0]) * 1e6 / float64(window)
	r.LateCPU = (cpu[3] - cpu[2]) * 1e6 / float64(window)
	after, err := e.usedMemory(ctx)
	if err != nil {
		return r, err
	}
	r.Memory = after - before
	r.Keys, err = e.keys(ctx, e.of(p))
	return r, err
}

// usedMemory is used_memory from INFO memory of the first server.
func (e *env) usedMemory(ctx context.Context) (int64, error) {
	info, err := e.stats[0].Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// serverCPU is the first server's CPU time so far (used_cpu_user plus
// used_cpu_sys, seconds).
func (e *env) serverCPU(ctx context.Context) (float64, error) {
	return e.serversCPU(ctx, e.stats[:1])
}

// serversCPU is serverCPU summed over the servers cs.
func (e *env) serversCPU(ctx context.Context, cs []*redis.Client) (float64, error) {
	var total float64
	for _, c := range cs {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, err
		}
		found := 0
		for _, line := range strings.Split(info, "\r\n") {
			for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, ok := strings.CutPrefix(line, f); ok {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil {
						return 0, err
					}
					total += x
					found++
				}
			}
		}
		if found != 2 {
			return 0, fmt.Errorf("INFO cpu lacks used_cpu_user or used_cpu_sys")
		}
	}
	return total, nil
}

func (r *Report) namesTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Distinct names (%d goroutines, each name locked and released once)\n\n", namesConc)
	b.WriteString("| locker | names | cycles/s early | cycles/s late | late ÷ early | server CPU µs/cycle early | late | Redis memory after | keys left | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, j := range r.Names {
		for _, x := range j.runs {
			errs := "0"
			if x.Errors > 0 {
				errs = fmt.Sprintf("%d (%s)", x.Errors, x.FirstErr)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f | %.1f | %.1f | %+.2f MB | %s | %s |\n", j.peer.name, fmtRate(float64(x.Names)),
				fmtRate(x.Early), fmtRate(x.Late), x.Late/x.Early, x.EarlyCPU, x.LateCPU, float64(x.Memory)/(1<<20), fmtRate(float64(x.Keys)), errs)
		}
	}
	return b.String()
}
