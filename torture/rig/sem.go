package rig

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// OpSem is the Op of a request that takes a permit of a semaphore
// (Locker.Semaphore): its begin and call events name the semaphore
// semKey(name), and carry its permits (N); the hold, its writes, end and
// Unlock are logged as a lock's are, under that key. A semaphore of name
// k and the lock k are separate in lockgate (a permit never excludes the
// lock, nor the lock a permit), so the rig takes both on the same names:
// the logs and the resource tell them apart by the key.
const OpSem = "sem"

// semPrefix starts the key a semaphore's events and writes are logged
// under.
const semPrefix = "sem:"

// semKey is the key of semaphore name in the logs and at the resource.
func semKey(name string) string { return semPrefix + name }

// isSem reports whether key is a semaphore's (semKey).
func isSem(key string) bool { return strings.HasPrefix(key, semPrefix) }

// DefaultPermits is a semaphore's permits when RunConfig.Permits is 0.
const DefaultPermits = 3

// semStep is a request for a permit of semaphore name (Locker.Semaphore;
// the naivesem control: a counter), held as a lock is: written to with the
// permit's fence while its context is live, then released.
func (a *actor) semStep(ctx, stop context.Context, name, holder, op string, budget, ttl, wait, ctxEnds time.Duration) {
	w := a.w
	key, n := semKey(name), w.cfg.Permits
	if op == "trylock" {
		wait = core.NoWait // one attempt
	}
	t0 := now()
	begin := Event{Ev: "begin", Worker: a.name, Key: key, Holder: holder, Op: OpSem, Start: t0, TTL: int64(ttl), N: n}
	w.log.add(begin, true)
	if w.cfg.Lock == LockNaiveSem {
		a.naiveSem(ctx, stop, name, holder, op, budget, ttl, t0)
		return
	}
	ctx = context.WithValue(ctx, callKey{}, &begin)
	locker := w.lockerNow()
	lease, err := locker.Semaphore(ctx, name, n, core.WithTTL(ttl), core.WithWait(wait))
	ev := Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: OpSem, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: result(err), Why: cause(err), Ends: t0 + int64(ctxEnds), N: n}
	if err != nil {
		w.log.add(ev, true)
		return
	}
	ev.Fence, ev.Res = lease.Fence(), ResAcquired
	w.log.add(ev, true)
	a.hold(stop, locker, lease, key, holder, ttl)
}

// naiveSem is the naivesem control: a counting semaphore as a counter,
// INCR to take a permit (DECR and retry every 10ms within the budget when
// the count passed the permits), an expiry set by the taker that created
// the counter and never renewed, DECR to release; the count it got is its
// fence. No holder has an entry of its own: when the counter expires under
// holders, as many more get in (and their DECRs then take it below zero).
func (a *actor) naiveSem(ctx, stop context.Context, name, holder, op string, budget, ttl time.Duration, t0 int64) {
	w, n := a.w, int64(a.w.cfg.Permits)
	key, ck := semKey(name), "naivesem:"+name
	deadline := time.Now().Add(budget)
	res, fence := ResBusy, int64(0)
	for {
		c, err := w.client.Incr(ctx, ck).Result()
		if err == nil && c == 1 {
			err = w.client.PExpire(ctx, ck, ttl).Err()
		}
		if err != nil {
			res = result(err)
			if ctx.Err() == nil {
				res = ResUnavailable
			}
			break
		}
		if c <= n {
			res, fence = ResAcquired, c
			break
		}
		w.client.Decr(ctx, ck)
		if op == "trylock" || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.log.add(Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: OpSem, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: res, Fence: fence, N: int(n)}, true)
	if res != ResAcquired {
		return
	}
	writes := 1 + a.rng.IntN(4)
	gap := time.Duration(a.rng.IntN(8)) * time.Millisecond
	if a.rng.Float64() < 0.1 {
		gap = time.Duration(float64(ttl)*(1.5+1.5*a.rng.Float64())) / time.Duration(writes)
	}
	for i := 0; i < writes && stop.Err() == nil; i++ {
		time.Sleep(gap)
		t := now()
		r := a.res.write(key, holder, fence, true)
		w.log.add(Event{Ev: "write", Worker: a.name, Key: key, Holder: holder, Fence: fence, Start: t, End: now(), Live: true, Res: r}, true)
	}
	w.log.add(Event{Ev: "end", Worker: a.name, Key: key, Holder: holder, End: now(), Why: "unlock"}, true)
	w.client.Decr(context.Background(), ck)
}

// semaphores judges the holds of every semaphore (keys by semKey, with
// their permits):
//
//   - at most N holders: at each holder's first accepted write, the other
//     holders of the name that still believed they held a permit (from
//     their call's return to their end), as the dishonest-holder rule
//     judges a lock's, must be fewer than N — a holder frozen then (or
//     between its acquisition and then: a pause, or a stall of its
//     process) and one whose permit Redis's data may have lost are counted
//     apart as explained, as there (lost data: between the earlier call's
//     start and the later one's return, either may be the later); beyond
//     that, an overfull semaphore (SemOverfull);
//   - fences: a permit granted after another of the name has a higher
//     fence (its call began after the other's returned), within the last
//     semFenceWindow holds before it, and no two holds of a name share a
//     fence — unless Redis's data may have been lost between (SemFences).
func (r *Report) semaphores(holds map[string]*holdSpan, frozen, stalls map[string][]interval, lossAt []interval) {
	byKey := map[string][]*holdSpan{}
	for _, h := range holds {
		if h.permits > 0 && isSem(h.key) {
			byKey[h.key] = append(byKey[h.key], h)
		}
	}
	for key, hs := range byKey {
		sort.Slice(hs, func(i, j int) bool { return hs[i].acq < hs[j].acq })
		n := 0
		for _, h := range hs {
			n = max(n, h.permits)
		}
		for _, y := range hs {
			if y.firstWrite == 0 {
				continue // nothing written under it: nothing to protect
			}
			r.SemJudged++
			with, explained := r.believers(y, hs, nil, frozen, stalls, lossAt)
			r.SemHoldersMax = max(r.SemHoldersMax, 1+len(with))
			if 1+len(with) > n {
				r.SemOverfull = append(r.SemOverfull, fmt.Sprintf("%s: %d holders of %d permits when %s (fence %d) wrote at %s: %s still believed (and %d more, explained)",
					key, 1+len(with), n, y.holder, y.fence, ts(y.firstWrite), strings.Join(with, ", "), explained))
			}
		}
		breaks, pairs := fenceOrder(key, hs, semFenceWindow(n), lossAt)
		r.SemFences, r.SemFencePairs = append(r.SemFences, breaks...), r.SemFencePairs+pairs
	}
}

// believers lists the other holds of hs (sorted by return) that still
// believed they held when y first wrote, and that conflict with y (nil:
// all do), but for those explained — a holder frozen then or between its
// acquisition and then (a pause, or a stall of its process), or one whose
// hold Redis's data may have lost (between the earlier call's start and
// the later one's return) — which it counts.
func (r *Report) believers(y *holdSpan, hs []*holdSpan, conflict func(x *holdSpan) bool, frozen, stalls map[string][]interval, lossAt []interval) (with []string, explained int) {
	t := y.firstWrite
	for _, x := range hs {
		if x.acq > t {
			break
		}
		if x == y || x.worker == y.worker || x.end <= t || conflict != nil && !conflict(x) {
			continue
		}
		switch {
		case anyCovers(frozen[x.proc], t) || anyIn(frozen[x.proc], x.acq, t) || anyIn(stalls[x.proc], x.acq, t):
			r.FrozenOverlaps++
			explained++
		case anyIn(lossAt, min(x.asked, y.asked), max(x.acq, y.acq)):
			r.StateLossOverlaps++
			explained++
		default:
			with = append(with, fmt.Sprintf("%s (fence %d, ttl %v, until %s)", x.holder, x.fence, time.Duration(x.ttl), ts(x.end)))
		}
	}
	return with, explained
}

// fenceOrder checks the fences of key's holds hs (sorted by return): a
// hold granted after another (its call began after the other's returned),
// within the last window holds before it, has a higher fence, and no two
// share one — unless Redis's data may have been lost between. It returns
// the breaks and how many pairs it compared.
func fenceOrder(key string, hs []*holdSpan, window int, lossAt []interval) (out []string, pairs int) {
	byFence := map[int64]*holdSpan{}
	for j, y := range hs {
		if x := byFence[y.fence]; x != nil && !anyIn(lossAt, min(x.asked, y.asked), max(x.acq, y.acq)) {
			out = append(out, fmt.Sprintf("%s: %s and %s both hold fence %d", key, x.holder, y.holder, y.fence))
		}
		byFence[y.fence] = y
		for i := j - 1; i >= 0 && i >= j-window; i-- {
			x := hs[i]
			if x.acq >= y.asked {
				continue // not surely granted before y was asked for
			}
			pairs++
			if x.fence >= y.fence && !anyIn(lossAt, x.asked, y.acq) {
				out = append(out, fmt.Sprintf("%s: %s (fence %d), asked at %s, after %s (fence %d) had returned at %s",
					key, y.holder, y.fence, ts(y.asked), x.holder, x.fence, ts(x.acq)))
			}
		}
	}
	return out, pairs
}

// semFenceWindow is how many earlier holds (by return) the fence rule
// compares each hold of a semaphore of n permits with.
func semFenceWindow(n int) int { return 4*n + 8 }

// atLeast returns where n or more of ivs overlap (n ≤ 1: their union).
func atLeast(ivs []interval, n int) []interval {
	type edge struct {
		t int64
		d int
	}
	es := make([]edge, 0, 2*len(ivs))
	for _, iv := range ivs {
		if iv.end > iv.start {
			es = append(es, edge{iv.start, 1}, edge{iv.end, -1})
		}
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].t != es[j].t {
			return es[i].t < es[j].t
		}
		return es[i].d > es[j].d
	})
	var out []interval
	c := 0
	var from int64
	for _, e := range es {
		was := c
		c += e.d
		switch {
		case was < n && c >= n:
			from = e.t
		case was >= n && c < n && e.t > from:
			if len(out) > 0 && out[len(out)-1].end == from {
				out[len(out)-1].end = e.t
			} else {
				out = append(out, interval{from, e.t})
			}
		}
	}
	return out
}
