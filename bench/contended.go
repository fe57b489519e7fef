package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Shape of the contended benchmark.
const (
	contendedGoroutines = 32
	contendedLockers    = 3
)

// Keys of the contended benchmark: one key, and 8 at once (on a Cluster
// they fall on every master), goroutine g taking key g mod keys.
var contendedKeys = []int{1, 8}

// Critical-section lengths of the contended benchmark (time.Sleep inside
// the hold is the work).
var contendedHolds = []time.Duration{0, 2 * time.Millisecond}

// conResult is one contended run: 32 goroutines over 3 instances of the
// configuration (3 nodes, each with its own client or clients; goroutine g
// uses instance g mod 3), all on one key (or g on key g mod keys), each taking the lock in a loop
// with a wait budget of 2s, holding it for the hold, releasing it, until the
// run's end (a wait still going on then is cut short and not counted).
type conResult struct {
	Elapsed time.Duration
	Acq     int64
	// Handoffs are acquisitions by another goroutine than the key's
	// previous holder (a goroutine taking its own lock straight back is
	// not one).
	Handoffs             int64
	AcqRate, HandoffRate float64
	RTT                  time.Duration // median PING round trip, measured before the run
	// Ratio is handoffs/s ÷ keys/(hold + RTT): 1 is one handoff per hold
	// plus one round trip on every key. RatioActual uses the hold as it really lasted
	// (time.Sleep overshoots) instead of the nominal one.
	Ratio, RatioActual float64
	MeanHold           time.Duration
	MinG, MaxG         int64 // acquisitions per goroutine
	MinL, MaxL         int64 // acquisitions per Locker
	// PastBudget counts waits that ended busy at the 2s budget
	// (ErrNotObtained / a context deadline).
	PastBudget                  int64
	Cut, OtherErrs, ReleaseErrs int64
	FirstErr                    string
	// Violations counts acquisitions that found another holder inside the
	// critical section.
	Violations int64
	// Commands sent by the configuration's clients (see counters) and
	// processed by its servers (INFO commandstats, calls summed, INFO itself
	// excluded; commands run by scripts count too).
	Wire, Hook     int64
	WireOK, Hooked bool
	Server         cmdStats
	WaitP50        time.Duration // of successful acquisitions
	WaitP99        time.Duration
}

func runContended(ctx context.Context, e *env, p peer, hold time.Duration, keys int, d time.Duration, tag string) (r conResult, err error) {
	cnt := &counters{}
	ls := make([]locker, 0, contendedLockers)
	defer func() {
		for _, l := range ls {
			l.close()
		}
	}()
	for i := range contendedLockers {
		l, err := p.open(e, i, cnt)
		if err != nil {
			return r, err
		}
		ls = append(ls, l)
	}
	// One cycle per instance on a key of its own: connections dialled,
	// scripts loaded, the server checked, before anything is counted.
	for i, l := range ls {
		if err := l.do(ctx, fmt.Sprintf("bench:cw:%s:%d", tag, i), waitBudget, nil); err != nil {
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprintf("bench:c:%s:%d", tag, k)
	}

	r.RTT = e.rtt(ctx)
	before, err := e.commandStats(ctx, e.of(p))
	if err != nil {
		return r, err
	}
	cb := cnt.snap()

	var (
		violations atomic.Int64
		inside     = make([]atomic.Int64, keys)
		last       = make([]atomic.Int64, keys)
		wg         sync.WaitGroup
		begin      = make(chan struct{})
		firstAcq   = make(chan struct{})
		firstOnce  sync.Once
	)
	for k := range last {
		last[k].Store(-1)
	}
	type gstat struct {
		acq, handoffs, past, cut, other, rel int64
		held                                 time.Duration
		first                                error
		wait                                 hist
	}
	gs := make([]gstat, contendedGoroutines)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for g := range contendedGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &gs[g]
			lk := ls[g%contendedLockers]
			k := g % keys
			key := names[k]
			var t0 time.Time
			body := func() {
				got := time.Now()
				st.wait.record(got.Sub(t0))
				if inside[k].Add(1) != 1 {
					violations.Add(1)
				}
				if prev := last[k].Swap(int64(g)); prev >= 0 && prev != int64(g) {
					st.handoffs++
				}
				st.acq++
				firstOnce.Do(func() { close(firstAcq) })
				if hold > 0 {
					time.Sleep(hold)
				}
				st.held += time.Since(got)
				inside[k].Add(-1)
			}
			<-begin
			for runCtx.Err() == nil {
				t0 = time.Now()
				err := lk.do(runCtx, key, waitBudget, body)
				switch {
				case err == nil:
				case errors.Is(err, errRelease):
					st.rel++
				case runCtx.Err() != nil:
					st.cut++
					continue
				case errors.Is(err, errBusy):
					st.past++
				default:
					st.other++
				}
				if err != nil && st.first == nil {
					st.first = err
				}
			}
		}()
	}
	start := startFor(ctx, begin, d)
	// A run that has acquired nothing by d (a loaded machine's slow start,
	// in the smoke test's 150ms) goes on until its first acquisition, at
	// most 20×d more, so that a slow start is not read as no progress;
	// Elapsed counts the whole run. A locker that never acquires still
	// shows 0.
	select {
	case <-firstAcq:
	default:
		timer := time.NewTimer(20 * d)
		select {
		case <-firstAcq:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	cancel()
	wg.Wait()
	r.Elapsed = time.Since(start)

	after, err := e.commandStats(ctx, e.of(p))
	if err != nil {
		return r, err
	}
	ca := cnt.snap()
	r.Server = after.delta(before)
	r.Wire, r.Hook = ca.wire-cb.wire, ca.hook-cb.hook
	r.WireOK, r.Hooked = !cnt.broken.Load(), cnt.hooked.Load()

	perG := make([]int64, contendedGoroutines)
	perL := make([]int64, contendedLockers)
	var waits hist
	var held time.Duration
	for g := range gs {
		st := &gs[g]
		r.Acq += st.acq
		r.Handoffs += st.handoffs
		r.PastBudget += st.past
		r.Cut += st.cut
		r.OtherErrs += st.other
		r.ReleaseErrs += st.rel
		if st.first != nil && r.FirstErr == "" && (st.other > 0 || st.rel > 0) {
			r.FirstErr = st.first.Error()
		}
		held += st.held
		perG[g] = st.acq
		perL[g%contendedLockers] += st.acq
		waits.merge(&st.wait)
	}
	r.Violations = violations.Load()
	if r.Violations > 0 {
		fmt.Fprintf(os.Stderr, "\n!!! MUTUAL EXCLUSION VIOLATED: %s hold=%v: %d acquisitions found another holder inside the critical section !!!\n\n", p.name, hold, r.Violations)
	}
	secs := r.Elapsed.Seconds()
	r.AcqRate, r.HandoffRate = float64(r.Acq)/secs, float64(r.Handoffs)/secs
	r.MeanHold = held / time.Duration(max(r.Acq, 1))
	r.Ratio = r.HandoffRate * (hold + r.RTT).Seconds() / float64(keys)
	r.RatioActual = r.HandoffRate * (r.MeanHold + r.RTT).Seconds() / float64(keys)
	r.MinG, r.MaxG = slices.Min(perG), slices.Max(perG)
	r.MinL, r.MaxL = slices.Min(perL), slices.Max(perL)
	r.WaitP50, r.WaitP99 = waits.quantile(0.50), waits.quantile(0.99)
	return r, ctx.Err()
}
