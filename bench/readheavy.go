package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockgate/lockgate/core"
)

// The read-heavy benchmark: a voucher read far more often than restocked.
// 32 goroutines over 3 lockgate Lockers on one name, each cycle a reader 9
// times in 10 and a writer once, holding readHold; shared takes the
// readers' lock with RLock (the writers with Lock), exclusive takes every
// cycle with Lock. Both draw the same sequence of readers and writers.
const (
	readHeavyGoroutines = 32
	readHeavyLockers    = 3
	readHold            = 2 * time.Millisecond
	readShare           = 0.9
)

// readHeavyModes are the two configurations, in the order they run.
var readHeavyModes = []string{"shared", "exclusive"}

type readHeavyJob struct {
	name, mode string
	runs       []readHeavyResult
}

// readHeavyResult is one read-heavy run.
type readHeavyResult struct {
	Elapsed       time.Duration
	Reads, Writes int64
	// CycleRate, ReadRate, WriteRate are per second of the run.
	CycleRate, ReadRate, WriteRate float64
	// Writers' waits (successful ones): p50, p99, max.
	WriteP50, WriteP99, WriteMax time.Duration
	// PastBudget counts writes that ended busy at the 2s budget.
	PastBudget int64
	// Violations: a writer inside with anyone, or a reader with a writer.
	Violations int64
	Errors     int64
	FirstErr   string
}

// rwGauge watches the critical section of a read-heavy run.
type rwGauge struct {
	mu                         sync.Mutex
	readers, writers, breaches int64
}

func (g *rwGauge) enter(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.writers > 0 || write && g.readers > 0 {
		g.breaches++
	}
	if write {
		g.writers++
	} else {
		g.readers++
	}
}

func (g *rwGauge) exit(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if write {
		g.writers--
	} else {
		g.readers--
	}
}

// runReadHeavy runs mode ("shared" or "exclusive") for d on key tag.
func runReadHeavy(ctx context.Context, e *env, mode string, d time.Duration, tag string) (readHeavyResult, error) {
	var r readHeavyResult
	ls := make([]*core.Locker, 0, readHeavyLockers)
	var cs []interface{ Close() error }
	defer func() {
		for _, l := range ls {
			l.Close() // before its client: the undos of calls cut at the end go first
		}
		for _, c := range cs {
			c.Close()
		}
	}()
	for range readHeavyLockers {
		c := newClientWith(e.addr(0), nil, true)
		cs = append(cs, c)
		l, err := core.New(c, core.WithWait(waitBudget))
		if err != nil {
			return r, err
		}
		ls = append(ls, l)
		// warm-up: connections dialled, scripts loaded
		for _, take := range []func(context.Context, string, ...core.LockOption) (*core.Lease, error){l.Lock, l.RLock} {
			s, err := take(ctx, "bench:rhw:"+tag)
			if err != nil {
				return r, fmt.Errorf("warm-up: %w", err)
			}
			s.Unlock(ctx)
		}
	}
	key := "bench:rh:" + tag
	type gstat struct {
		reads, writes, past, errs int64
		first                     error
		wait                      hist
		maxWait                   time.Duration
	}
	gs := make([]gstat, readHeavyGoroutines)
	g := &rwGauge{}
	begin := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range readHeavyGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, l := &gs[i], ls[i%readHeavyLockers]
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			<-begin
			for runCtx.Err() == nil {
				write := rng.Float64() >= readShare
				take := l.Lock
				if !write && mode == "shared" {
					take = l.RLock
				}
				t0 := time.Now()
				s, err := take(runCtx, key)
				switch {
				case err == nil:
				case runCtx.Err() != nil:
					return // cut by the run's end: not counted
				case errors.Is(err, core.ErrNotObtained):
					if write {
						st.past++
					}
					continue
				default:
					st.errs++
					if st.first == nil {
						st.first = err
					}
					continue
				}
				if write {
					w := time.Since(t0)
					st.wait.record(w)
					st.maxWait = max(st.maxWait, w)
				}
				g.enter(write)
				time.Sleep(readHold) // the work
				g.exit(write)
				if err := s.Unlock(context.Background()); err != nil {
					st.errs++
					if st.first == nil {
						st.first = err
					}
				}
				if write {
					st.writes++
				} else {
					st.reads++
				}
			}
		}()
	}
	start := startFor(ctx, begin, d)
	cancel()
	wg.Wait()
	r.Elapsed = time.Since(start)
	var waits hist
	for i := range gs {
		st := &gs[i]
		r.Reads += st.reads
		r.Writes += st.writes
		r.PastBudget += st.past
		r.Errors += st.errs
		if st.first != nil && r.FirstErr == "" {
			r.FirstErr = st.first.Error()
		}
		waits.merge(&st.wait)
		r.WriteMax = max(r.WriteMax, st.maxWait)
	}
	secs := r.Elapsed.Seconds()
	r.CycleRate, r.ReadRate, r.WriteRate = float64(r.Reads+r.Writes)/secs, float64(r.Reads)/secs, float64(r.Writes)/secs
	r.WriteP50, r.WriteP99 = waits.quantile(0.5), waits.quantile(0.99)
	r.Violations = g.breaches
	return r, nil
}

// readHeavyTable is the report's read-heavy section: medians over the
// repetitions, and shared ÷ exclusive.
func (r *Report) readHeavyTable() string {
	var b strings.Builder
	b.WriteString("## Read-heavy\n\n")
	b.WriteString("| configuration | cycles/s | reads/s | writes/s | writer wait p50 / p99 / max | writes past budget | violations | errors |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	rates := map[string]float64{}
	for _, j := range r.ReadHeavy {
		med := func(f func(readHeavyResult) float64) float64 { return spreadOf(collect(j.runs, f)).Med }
		var past, viol, errs int64
		var p50, p99, mx time.Duration
		for _, x := range j.runs {
			past, viol, errs = past+x.PastBudget, viol+x.Violations, errs+x.Errors
			p50, p99, mx = max(p50, x.WriteP50), max(p99, x.WriteP99), max(mx, x.WriteMax)
		}
		rates[j.mode] = med(func(x readHeavyResult) float64 { return x.CycleRate })
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %v / %v / %v | %d | %d | %d |\n", j.name, rates[j.mode],
			med(func(x readHeavyResult) float64 { return x.ReadRate }), med(func(x readHeavyResult) float64 { return x.WriteRate }),
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), mx.Round(time.Millisecond), past, viol, errs)
	}
	if rates["exclusive"] > 0 && rates["shared"] > 0 {
		fmt.Fprintf(&b, "\nshared ÷ exclusive: %.2f× the cycles/s\n", rates["shared"]/rates["exclusive"])
	}
	return b.String()
}

// readHeavyLine is a read-heavy run's progress line.
func readHeavyLine(rep, reps int, j *readHeavyJob, res readHeavyResult) string {
	return "rep " + strconv.Itoa(rep+1) + "/" + strconv.Itoa(reps) + fmt.Sprintf(" %-45s %7.0f cycles/s (%6.0f reads/s, %4.0f writes/s) writer wait p99 %v max %v past-budget %d violations %d%s",
		j.name, res.CycleRate, res.ReadRate, res.WriteRate, res.WriteP99.Round(time.Millisecond), res.WriteMax.Round(time.Millisecond), res.PastBudget, res.Violations, errNote(res.Errors, res.FirstErr))
}
