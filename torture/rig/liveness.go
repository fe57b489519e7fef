package rig

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The liveness rules: stalls (a lock free, or granted and unclaimed, while a
// live waiter waits on a healthy path, for longer than Limits.Stall), FIFO
// breaks (a live waiter overtaken by a call that began after it had queued),
// and dishonest unavailability (ErrUnavailable from a call whose path to
// Redis had no fault, or only a slow one that cannot explain the answer).
//
// "Healthy" and "live" are judged from the fault log: a waiter's wait is
// judged only where no fault that stops Redis answering or loses its data
// (any Redis process, the network of any server) overlaps, nor latency on
// its own path, nor a freeze of its own process — each with Settle after its
// end. A lock is taken as busy while a hold of it is believed or may still
// be in Redis (to its release, or its TTL after renewals stopped), while a
// call of unknown outcome may hold it, just after a waiter gave up (its
// undo passes the lock on), and while a waiter that died or froze in the
// queue may have been granted it (until its queue entry expires).

// history is what Check read, for the liveness rules.
type history struct {
	events   []Event
	calls    []Event
	holds    map[string]*holdSpan
	faults   []Fault
	frozen   map[string][]interval
	stalls   map[string][]interval // stretches in which a process did not run
	killedAt map[string]int64
	unknown  map[string][]interval
	lossAt   []interval
	lim      Limits
}

// downFault reports whether f can stop Redis answering, or lose its data,
// for a worker's path (every worker's).
func downFault(f Fault) bool {
	switch f.Kind {
	case FaultPause, FaultKill, FaultKillWaiters, FaultWorkerLatency, FaultSlowReply, FaultCommandLatency, FaultLatency:
		return false
	case FaultNodeNet:
		return f.D == 0 // a cut or a late reply; with a latency, slow only
	}
	return true
}

// slowOn reports whether f slows the replies on proc's path (by f.D).
func slowOn(f Fault, proc string) bool {
	switch f.Kind {
	case FaultLatency:
		return true
	case FaultNodeNet:
		return f.D > 0
	case FaultWorkerLatency, FaultSlowReply, FaultCommandLatency:
		return slotOf(f.Target) == slotOf(proc)
	}
	return false
}

// excusesOwnWaits reports whether a fault slowing a waiter's path excuses
// a stall of its own wait. Command latency does not: its Pub/Sub connection
// is untouched, so a grant reaches it at once, and the most a claim can
// take is three of its replies (the queueing attempt's; a check of the
// lock's owner after the room subscribed, and the attempt it wakes).
func excusesOwnWaits(f Fault) bool { return f.Kind != FaultCommandLatency }

// slowClaims is how many times a fault's latency a waiter on the slowed
// path may take to claim a grant (see allowed).
func slowClaims(f Fault) int64 {
	if f.Kind == FaultCommandLatency {
		return 3
	}
	return 2
}

// slotOf is the worker slot of a process ("w6" of "w6.42"): the proxies a
// latency fault slows are the slot's, and outlive the process they were
// aimed at when it is killed and restarted (as the crowd is, every few
// seconds) while the fault lasts.
func slotOf(proc string) string {
	s, _, _ := strings.Cut(proc, ".")
	return s
}

// slowDuring reports whether a fault slowed proc's path within [a, b].
func slowDuring(faults []Fault, proc string, a, b int64) bool {
	for _, f := range faults {
		if slowOn(f, proc) && f.Start <= b && f.End >= a {
			return true
		}
	}
	return false
}

// entryLife is how long a waiter's queue entry lives after a refresh (as
// core computes it): after its process dies, a grant to it can keep the
// lock that long.
func entryLife(ttl int64) int64 { return max(ttl/2, ttl/3+int64(100*time.Millisecond)) }

// wait is one Lock that queued, as its worker saw it.
type wait struct {
	c      Event // the call; End 0 if its worker died in it
	queued int64
}

func (r *Report) liveness(h *history) {
	lim := h.lim
	settle := int64(lim.Settle)
	queued := map[string]int64{}
	for _, e := range h.events {
		if e.Ev == "queued" {
			queued[e.Holder] = e.Start
		}
	}
	ended := map[string]bool{}
	var waits []wait
	for _, c := range h.calls {
		if q, ok := queued[c.Holder]; ok && (c.Op == "lock" || c.Op == "cancel" || c.Op == OpSem || c.Op == OpRW) {
			waits = append(waits, wait{c: c, queued: q})
			ended[c.Holder] = true
		}
	}
	begun := map[string]Event{}
	for _, e := range h.events {
		if e.Ev == "begin" {
			begun[e.Holder] = e
		}
	}
	// Excused windows: faults that stop Redis or lose data, for everyone.
	var down []interval
	for _, f := range h.faults {
		if downFault(f) {
			down = append(down, interval{f.Start, f.End + settle})
		}
	}
	for _, l := range h.lossAt {
		down = append(down, interval{l.start, l.end + settle})
	}
	slowFor := func(proc string) []interval {
		var out []interval
		for _, f := range h.faults {
			if slowOn(f, proc) && excusesOwnWaits(f) {
				out = append(out, interval{f.Start, f.End + settle})
			}
		}
		return out
	}
	frozenFor := func(proc string) []interval {
		var out []interval
		for _, f := range h.frozen[proc] {
			out = append(out, interval{f.start, f.end + settle})
		}
		return out
	}

	// When each lock may be held by someone who is not a live waiter.
	busy := map[string][]interval{}
	for _, hs := range h.holds {
		from := hs.acq
		if hs.multi != "" {
			from = hs.asked // a multi request may take a key long before it returns
		}
		busy[hs.key] = append(busy[hs.key], interval{from, hs.gone()})
	}
	for key, us := range h.unknown {
		busy[key] = append(busy[key], us...)
	}
	undo, margin := int64(lim.Undo), int64(lim.Margin)
	for _, w := range waits {
		life := entryLife(ttlOf(w.c, lim))
		if w.c.Res != ResAcquired {
			busy[w.c.Key] = append(busy[w.c.Key], interval{w.c.End, w.c.End + undo})
		}
		for _, f := range h.frozen[w.c.proc()] {
			if f.start <= w.c.End && f.end >= w.queued {
				busy[w.c.Key] = append(busy[w.c.Key], interval{f.start, max(f.end, f.start+life) + margin})
			}
		}

	}
	for call, q := range queued {
		if ended[call] {
			continue
		}
		// Queued, and its worker died in the call (or the run ended).
		b := begun[call]
		if b.Op == OpMulti {
			continue // its keys count as held to TTL after the death (Check's unknown outcomes)
		}
		end := h.killedAt[b.proc()]
		if end < q {
			continue // the run ended: nothing after it is judged
		}
		busy[b.Key] = append(busy[b.Key], interval{q, end + entryLife(ttlOf(b, lim)) + margin})
	}

	// A semaphore is busy where as many of its permits may be held as it
	// has: each interval above is one permit.
	permits := map[string]int{}
	for _, w := range waits {
		permits[w.c.Key] = max(permits[w.c.Key], w.c.N)
	}
	for key, n := range permits {
		if n > 1 {
			busy[key] = atLeast(busy[key], n)
		}
	}

	// Stalls and FIFO breaks, wait by wait.
	byKey := map[string][]*holdSpan{}
	for _, hs := range h.holds {
		byKey[hs.key] = append(byKey[hs.key], hs)
	}
	// A waiter on a slow path learns of its grant that much later: a
	// handover to it may take twice its latency more (three times with
	// command latency, see excusesOwnWaits).
	type slowWait struct {
		interval
		d int64
	}
	slowWaits := map[string][]slowWait{}
	for _, w := range waits {
		for _, f := range h.faults {
			if slowOn(f, w.c.proc()) && f.Start <= w.c.End && f.End+settle >= w.queued {
				slowWaits[w.c.Key] = append(slowWaits[w.c.Key], slowWait{interval{max(f.Start, w.queued), min(f.End+settle, w.c.End)}, slowClaims(f) * f.D})
			}
		}
	}
	allowed := func(key string, f interval) int64 {
		a := int64(lim.Stall)
		for _, s := range slowWaits[key] {
			if s.start <= f.end && s.end >= f.start {
				a = max(a, int64(lim.Stall)+s.d)
			}
		}
		return a
	}
	for _, w := range waits {
		c := w.c
		excused := append(append(append([]interval(nil), down...), slowFor(c.proc())...), frozenFor(c.proc())...)
		free := subtract([]interval{{w.queued, c.End}}, append(excused, busy[c.Key]...))
		judged := subtract([]interval{{w.queued, c.End}}, excused)
		if len(judged) > 0 {
			r.CheckedWaits++
		}
		for _, f := range free {
			if f.end-f.start > allowed(c.Key, f) {
				r.Stalls = append(r.Stalls, fmt.Sprintf("%s %s (ttl %v, budget %v): the lock was free or unclaimed for %v from %s while it waited (queued %s, %s at %s)",
					c.Worker, c.Key, time.Duration(ttlOf(c, lim)), time.Duration(c.Budget), time.Duration(f.end-f.start), ts(f.start), ts(w.queued), c.Res, ts(c.End)))
				break
			}
		}
		if lim.Redlock {
			continue // Redlock's waiters do not queue in Redis: no order is promised
		}
		if shared(c.Key) {
			// Permits freed together are granted in order, but their
			// waiters may return in any: no order the logs can show.
			continue
		}
		// Every later arrival while it waited: judged unless a fault
		// overlaps, an overtaking one a break.
		for _, x := range byKey[c.Key] {
			if x.holder == c.Holder || x.asked <= w.queued || x.asked >= c.End || anyIn(excused, w.queued, min(x.acq, c.End)) {
				continue
			}
			r.CheckedPairs++
			if x.acq < c.End {
				r.FIFOBreaks = append(r.FIFOBreaks, fmt.Sprintf("%s %s (ttl %v) queued at %s was overtaken by %s, which began at %s and got it at %s",
					c.Worker, c.Key, time.Duration(ttlOf(c, lim)), ts(w.queued), x.holder, ts(x.asked), ts(x.acq)))
			}
		}
	}
	var any []interval
	for _, f := range h.faults {
		any = append(any, interval{f.Start, f.End + settle})
	}
	r.handoffs(h, queued, any)
	r.unavailability(h, down)
}

// handoffs collects the latency of each handoff from a release to a queued
// waiter while no fault of any kind was in the air (a dead or frozen waiter
// granted first would count its queue entry's life): the release's end to
// the waiter's return.
func (r *Report) handoffs(h *history, queued map[string]int64, faulted []interval) {
	byKey := map[string][]*holdSpan{}
	for _, hs := range h.holds {
		byKey[hs.key] = append(byKey[hs.key], hs)
	}
	for key, hs := range byKey {
		if shared(key) {
			continue // the permit released is not told
		}
		slices.SortFunc(hs, func(a, b *holdSpan) int { return int(a.acq - b.acq) })
		for i := 1; i < len(hs); i++ {
			prev, next := hs[i-1], hs[i]
			q, ok := queued[next.holder]
			if prev.released == 0 || !ok || q > prev.released || next.acq < prev.released || anyIn(faulted, q, next.acq) {
				continue
			}
			r.Handoffs = append(r.Handoffs, time.Duration(next.acq-prev.released))
		}
	}
}

// unavailability flags ErrUnavailable answers no fault explains: none that
// stops Redis on the call's path (on Redlock: on two of the masters), no
// freeze of its worker, no cold start of its process; on a path that is
// only slow, or while the worker's process did not run for a stretch (it
// could not read a reply), an answer that says the time ran out is
// explained, any other is not (a slow Redis still answers everything). An own wait given up
// ("already ended") is never explained.
func (r *Report) unavailability(h *history, down []interval) {
	settle := int64(h.lim.Settle)
	// A process's first calls also dial its connections and load the
	// scripts: a cold start, judged from Settle after its first event.
	started := map[string]int64{}
	for _, e := range h.events {
		if t := max(e.Start, e.End); t > 0 && (started[e.proc()] == 0 || t < started[e.proc()]) {
			started[e.proc()] = t
		}
	}
	for _, c := range h.calls {
		if c.Res != ResUnavailable {
			continue
		}
		if cold := started[c.proc()] + settle; c.Start < cold && !strings.Contains(c.Why, "already ended") {
			continue
		}
		if strings.Contains(c.Why, "already ended") {
			// The call's own owner was given up while it went on: no fault
			// of Redis explains that.
			r.DishonestUnavailable = append(r.DishonestUnavailable, fmt.Sprintf("%s %s %s from %s to %s answered unavailable (%s)",
				c.Worker, c.Op, c.Key, ts(c.Start), ts(c.End), c.Why))
			continue
		}
		if anyIn(h.frozen[c.proc()], c.Start-settle, c.End) {
			continue
		}
		if h.lim.Redlock {
			nodes := map[string]bool{}
			for _, f := range h.faults {
				if downFault(f) && f.Start <= c.End && f.End+settle >= c.Start {
					nodes[f.Target] = true
				}
			}
			if len(nodes) >= 2 {
				continue
			}
		} else if anyIn(down, c.Start, c.End) {
			continue
		}
		slow := false
		for _, f := range h.faults {
			if slowOn(f, c.proc()) && f.Start <= c.End && f.End+settle >= c.Start {
				slow = true
			}
		}
		if (slow || anyIn(h.stalls[c.proc()], c.Start, c.End)) && ranOutOfTime(c.Why) {
			continue
		}
		r.DishonestUnavailable = append(r.DishonestUnavailable, fmt.Sprintf("%s %s %s from %s to %s answered unavailable (%s) on a path with %s",
			c.Worker, c.Op, c.Key, ts(c.Start), ts(c.End), c.Why, map[bool]string{true: "only latency", false: "no fault"}[slow]))
	}
}

// ranOutOfTime reports whether an unavailable answer says that time ran
// out: the budget before a reply, a reply after the lease's validity, or
// the client's own deadline or read timeout.
func ranOutOfTime(why string) bool {
	for _, s := range []string{"no answer within", "after the lease's validity", "deadline exceeded", "i/o timeout"} {
		if strings.Contains(why, s) {
			return true
		}
	}
	return false
}

// subtract returns what of ivs no interval of minus covers.
func subtract(ivs, minus []interval) []interval {
	out := ivs
	for _, m := range minus {
		var next []interval
		for _, iv := range out {
			if m.end <= iv.start || m.start >= iv.end {
				next = append(next, iv)
				continue
			}
			if m.start > iv.start {
				next = append(next, interval{iv.start, m.start})
			}
			if m.end < iv.end {
				next = append(next, interval{m.end, iv.end})
			}
		}
		out = next
		if len(out) == 0 {
			break
		}
	}
	return out
}
