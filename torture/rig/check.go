package rig

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Limits the checker holds a run to.
type Limits struct {
	TTL time.Duration
	// Margin is how long after a holder stopped holding (its unlock, loss,
	// death or Close) its lock may still answer "busy" to others beyond the
	// TTL: scheduling, and a waiter's retry when the holder's TTL runs out.
	// (A lock handed to a waiter that then paused or died stays held for at
	// most its queue entry's life, TTL/2, from the release that ended the
	// last hold: within the TTL.)
	Margin time.Duration
	// Undo is how long after Redis answers again (the end of the call, or
	// of the hang it overlapped) an attempt whose outcome its caller did not
	// learn may still hold the lock before the Locker undoes it.
	Undo time.Duration
	// Bound is how far past its budget a call may return.
	Bound time.Duration
	// Stall is how long a lock may stay free, or granted and unclaimed,
	// while a live waiter waits on a healthy path: 100ms plus the RTT and
	// the scheduling of a loaded 2-core machine (50ms).
	Stall time.Duration
	// Settle is how long after a fault ends its effects may still explain
	// an outcome: reconnections, retries, an undo's backoff.
	Settle time.Duration
	// Redlock: the topology has three masters; a fault of one is no
	// outage, and waiters do not queue in Redis (no FIFO to check).
	Redlock bool
}

// failoverSettle is how long after a forced failover the old master may
// still grant locks to clients that have not moved yet.
const failoverSettle = 3 * time.Second

// DefaultLimits are the checker's limits for a run with lease time ttl (0:
// each call's own, logged; 500ms where none is).
func DefaultLimits(ttl time.Duration) Limits {
	if ttl <= 0 {
		ttl = 500 * time.Millisecond
	}
	return Limits{TTL: ttl, Margin: 250 * time.Millisecond, Undo: 100 * time.Millisecond, Bound: 300 * time.Millisecond,
		Stall: 150 * time.Millisecond, Settle: time.Second}
}

// Report is what the checker found.
type Report struct {
	Calls, Acquired, Busy, Unavailable, Canceled, Other int
	// Multi requests (LockMulti): calls, acquired; of those acquired, judged
	// (an accepted write on some key) and covered (on every key).
	MultiCalls, MultiAcquired, MultiJudged, MultiCovered int
	// Writes are those the workers logged (Unreached of them answered "did
	// not reach the resource"); Accepted and Rejected are those the
	// resource received. The two counts differ: a worker killed after its
	// write reached the resource logs nothing, and a write re-sent after a
	// lost reply is received twice.
	Writes, Unreached, Accepted, Rejected int
	Faults                                map[string]int

	// Semaphore requests: calls, acquired, busy; holds judged (an accepted
	// write); the most holders of one semaphore that believed at once when
	// one of them wrote (explained ones not counted), the most permits any
	// semaphore had; the pairs of holds whose fences were compared.
	SemCalls, SemAcquired, SemBusy, SemJudged int
	SemHoldersMax, SemPermits                 int
	SemFencePairs                             int

	// Read-write requests: calls (readers among them), acquired, busy;
	// holds judged (an accepted write); the most readers believing at once
	// when one of them wrote; the pairs of holds whose fences were compared.
	RWCalls, RWReads, RWAcquired, RWBusy, RWJudged int
	RWReadersMax, RWFencePairs                     int

	// Stretches in which a worker process did not run (more than 100ms
	// between its ticks), and the longest.
	Unscheduled        int
	LongestUnscheduled time.Duration

	// Violations, each a list of descriptions.
	Interleaved          []string // (a) with fencing, two holders' accepted writes interleave for a key
	WriteAfter           []string // a holder wrote although its lease context had ended
	Dishonest            []string // (d) a holder still believed it held the lock when the next one wrote
	Deadlocks            []string // (c) "busy" long after every holder of the key had stopped
	BusyWhenHung         []string // (e) "busy" from a call made while Redis could not answer
	Overlong             []string // (e) a call past its budget plus the bound
	BadReentry           []string // a re-entry with another fence, or not re-entrant
	MultiSplit           []string // a holder of a key of a multi acquisition still believed it held that key when the multi had begun to write (see Check)
	UnlockLies           []string // Unlock said "not held" of a hold nothing had ended
	DishonestUnavailable []string // ErrUnavailable from a call whose path to Redis had no fault (see liveness.go)
	SemOverfull          []string // more holders of a semaphore believed at once than its permits (sem.go)
	SemFences            []string // a semaphore's permit granted after another with a fence not above it, or two with one fence (sem.go)
	RWBreaks             []string // a read-write lock's writer beside another holder, or a reader beside a writer, both believing (rw.go)
	RWFences             []string // a read-write lock's hold granted after another with a fence not above it, or two with one fence (rw.go)

	// Liveness (liveness.go): counted apart from the violations.
	Stalls     []string // a lock free, or granted and unclaimed, for longer than Limits.Stall while a live waiter waited
	FIFOBreaks []string // a live waiter overtaken by a later arrival
	// Checked counts what the liveness rules could judge: waits on a
	// healthy path, and the pairs of a waiter and a later arrival.
	CheckedWaits, CheckedPairs int
	Handoffs                   []time.Duration // a release's end to the next holder's return, on a healthy path

	// Explained overlaps: a holder that still believed it held the lock
	// when the next wrote, because it was frozen (a pause, or its process
	// not run for 100ms or more: a stall), or the lock was lost with
	// Redis's data (restart, failover).
	FrozenOverlaps, StateLossOverlaps int
	// OverlapsUnfenced counts writes that fencing rejected because a newer
	// holder had written: without fencing they would have been accepted.
	OverlapsUnfenced int

	Recovery     map[string]time.Duration // max time to the next acquisition of every key after a fault of the kind
	HungDuration []time.Duration          // durations of calls made while Redis was hung
}

// Violations is the number of violations of every kind but deadlocks.
func (r *Report) Violations() int {
	return len(r.Interleaved) + len(r.WriteAfter) + len(r.Dishonest) + len(r.MultiSplit) + len(r.BusyWhenHung) + len(r.Overlong) + len(r.BadReentry) + len(r.UnlockLies) + len(r.DishonestUnavailable) +
		len(r.SemOverfull) + len(r.SemFences) + len(r.RWBreaks) + len(r.RWFences)
}

// Failed reports whether the run broke a promise: a violation, a deadlock,
// a stall or a FIFO break.
func (r *Report) Failed() bool {
	return r.Violations() > 0 || len(r.Deadlocks) > 0 || len(r.Stalls) > 0 || len(r.FIFOBreaks) > 0
}

// overlapsOfTwoNodes returns the intervals in which two different Redlock
// masters were faulted at once (hung, restarting, or on a faulted network).
func overlapsOfTwoNodes(faults []Fault) []interval {
	var nf []Fault
	for _, f := range faults {
		switch f.Kind {
		case FaultNodeRestart, FaultNodeHang, FaultNodeNet:
			nf = append(nf, f)
		}
	}
	var out []interval
	for i, a := range nf {
		for _, b := range nf[i+1:] {
			if a.Target != b.Target && a.Start < b.End && b.Start < a.End {
				out = append(out, interval{max(a.Start, b.Start), min(a.End, b.End)})
			}
		}
	}
	return out
}

// FaultTotal is the number of faults injected.
func (r *Report) FaultTotal() int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// keyFence names a hold by its lock and fence, as a renewal event does.
type keyFence struct {
	key   string
	fence int64
}

// hold is one acquisition as its worker saw it.
type holdSpan struct {
	holder, worker, key string
	proc                string // the worker's process
	multi               string // the multi request it is a part of ("" for a single Lock's)
	permits             int    // a semaphore's permit: the semaphore's permits (0 for a lock)
	read                bool   // a read-write lock's reader (rw.go)
	fence               int64
	ttl                 int64 // the lease time it asked for (ns)
	asked               int64 // the acquiring call's start: the lock may be taken in Redis from then on
	acq, end            int64 // believed from the Lock's return to the end event (or death)
	firstWrite          int64 // first accepted write at the resource, 0 if none
	told                bool  // the lock told the holder it was lost (or closed)
	ends                int64 // when the acquiring request's context ended at the latest (0: unknown)
	unlockAt            int64 // its Unlock's start (the watchdog stops renewing), 0 if none
	released            int64 // its Unlock's end when that released it, 0 otherwise
	// Redlock: a node faulted during its Unlock may keep it to this time (a
	// renewal held in a hung node runs when it resumes: TTL after that)
	minority int64
}

// gone is when the hold's lock is surely gone from Redis: when its Unlock
// released it; else TTL after renewals stopped (the holder's end, or its
// failed Unlock, whichever is later).
func (h *holdSpan) gone() int64 {
	if h.released > 0 {
		return h.released
	}
	return max(max(h.end, h.unlockAt)+h.ttl, h.minority)
}

// ttlOf is the lease time of call e (ns): its own, or the run's.
func ttlOf(e Event, lim Limits) int64 {
	if e.TTL > 0 {
		return e.TTL
	}
	return int64(lim.TTL)
}

type interval struct{ start, end int64 }

func (iv interval) covers(t int64) bool { return iv.start <= t && t <= iv.end }

// Check reads a run's logs and judges it.
func Check(events []Event, writes []Write, faults []Fault, lim Limits) *Report {
	r := &Report{Faults: map[string]int{}, Recovery: map[string]time.Duration{}}
	for _, f := range faults {
		r.Faults[f.Kind]++
	}
	// Windows of each kind, and the frozen intervals of each worker.
	frozen := map[string][]interval{}
	var hung, lossAt, outage []interval
	killedAt := map[string]int64{}
	var runEnd int64
	for _, f := range faults {
		iv := interval{f.Start, f.End}
		switch f.Kind {
		case FaultPause:
			frozen[f.Target] = append(frozen[f.Target], iv)
		case FaultKill, FaultKillWaiters:
			killedAt[f.Target] = f.Start
		case FaultHangShort, FaultHangLong, FaultMasterHang:
			hung = append(hung, iv)
			outage = append(outage, iv)
		case FaultRestart, FaultMasterRestart:
			lossAt = append(lossAt, iv)
			outage = append(outage, iv)
		case FaultMasterPause, FaultMigrate:
			outage = append(outage, iv) // one master's keys: not a hang of the deployment
		case FaultFailover:
			// Until every client has moved to the new master and the old
			// one is a replica, both may grant the lock: Redis's
			// asynchronous replication, which fencing (or replica
			// acknowledgement) exists for.
			lossAt = append(lossAt, interval{f.Start, f.End + int64(failoverSettle)})
		case FaultCut, FaultLateReply:
			// A cut, or a reply held past the read timeout (a renewal's too:
			// a short lease is lost meanwhile).
			outage = append(outage, iv)
		case FaultNodeNet:
			if !lim.Redlock { // one of Redlock's masters is no outage
				outage = append(outage, iv)
			}
		}
		runEnd = max(runEnd, f.End)
	}
	// Holds from the workers' logs, and the stretches in which a worker
	// process did not run (its "stall" events: not counted against a
	// call's budget).
	stalls := map[string][]interval{}
	holds := map[string]*holdSpan{}
	var calls, multis []Event       // multis: the multi requests' calls, whole (calls has their parts)
	pending := map[string]Event{}   // a worker's begun Lock/TryLock without its result (yet)
	var died []Event                // calls a worker never returned from
	renewed := map[keyFence]int64{} // the last renewal of each hold (its key and fence)
	extended := map[string]int64{}  // the end of each holder's last Extend that succeeded
	for _, e := range events {
		runEnd = max(runEnd, e.End)
		switch e.Ev {
		case "renewed":
			kf := keyFence{e.Key, e.Fence}
			renewed[kf] = max(renewed[kf], e.Start)
		case "stall":
			stalls[e.Worker] = append(stalls[e.Worker], interval{e.Start, e.End})
			r.Unscheduled++
			r.LongestUnscheduled = max(r.LongestUnscheduled, time.Duration(e.End-e.Start))
		case "begin":
			if p, ok := pending[e.Worker]; ok {
				died = append(died, multiParts(p)...) // cannot happen in one process; keep it
			}
			pending[e.Worker] = e
		case "call":
			if e.Op == "extend" && e.Res == ResOK {
				extended[e.Holder] = max(extended[e.Holder], e.End)
			}
			if e.Op == "lock" || e.Op == "trylock" || e.Op == "cancel" || e.Op == OpMulti || e.Op == OpSem || e.Op == OpRW {
				delete(pending, e.Worker)
			}
			if e.Op == OpMulti {
				multis = append(multis, e)
			}
			for _, e := range multiParts(e) {
				calls = append(calls, e)
				if e.Res == ResAcquired && e.Holder != "" {
					holds[e.Holder] = &holdSpan{holder: e.Holder, worker: e.Worker, proc: e.proc(), key: e.Key, multi: multiOf(e.Holder), permits: e.N, read: e.Read, fence: e.Fence, ttl: ttlOf(e, lim), asked: e.Start, acq: e.End, ends: e.Ends}
				}
				if h := holds[e.Holder]; h != nil && e.Op == "unlock" && h.unlockAt == 0 {
					h.unlockAt = e.Start
					switch until := faultedUntil(faults, e.Start, e.End); {
					case lim.Redlock && until > 0:
						// A release answered by a majority leaves the lock on
						// a node that did not answer: a minority's stale hold,
						// to its TTL after the node's last renewal.
						h.minority = until + h.ttl
					case e.Res == ResOK:
						h.released = e.End
					}
				}
			}
		case "end":
			if h := holds[e.Holder]; h != nil {
				if h.end == 0 {
					h.end = e.End
				}
				h.told = h.told || e.Why == "lost" || e.Why == "closed"
			}
		case "write":
			r.Writes++
			if e.Res == writeUnreached {
				r.Unreached++
			}
			if !e.Live {
				r.WriteAfter = append(r.WriteAfter, fmt.Sprintf("%s wrote %s at %s after its lease context ended", e.Holder, e.Key, ts(e.Start)))
			}
		}
	}
	for _, p := range pending {
		died = append(died, multiParts(p)...)
	}
	for _, h := range holds {
		if h.end == 0 {
			// No end logged: the worker was killed (its lock expires), or
			// the run ended first.
			h.end = runEnd
			if t, ok := killedAt[h.proc]; ok && t >= h.acq {
				h.end = t
			}
		}
		if u := hungUntil(faults, h.acq, h.end); lim.Redlock && h.released == 0 && u > h.end {
			// A renewal sent into a node hung past the hold's end runs when
			// the node resumes and keeps the hold there a TTL after that.
			h.minority = max(h.minority, u+h.ttl)
		}
	}
	for _, w := range writes {
		if w.Accepted {
			r.Accepted++
			if h := holds[w.Holder]; h != nil && h.firstWrite == 0 {
				h.firstWrite = w.At
			}
		} else {
			r.Rejected++
		}
	}

	// (a) interleaving of accepted writes; stale writes (a lower fence than
	// one already seen for the key: rejected by fencing, accepted without).
	r.Interleaved = interleavings(writes)
	highest := map[string]int64{}
	for _, w := range writes {
		if shared(w.Key) {
			continue // a semaphore's holders write side by side (sem.go)
		}
		if w.Fence < highest[w.Key] {
			r.OverlapsUnfenced++
		}
		highest[w.Key] = max(highest[w.Key], w.Fence)
	}

	// A multi acquisition acts on holding all its keys from its first
	// accepted write to any of them: each of its parts is judged from then.
	multiFirst := map[string]int64{}
	for _, h := range holds {
		if h.multi != "" && h.firstWrite > 0 && (multiFirst[h.multi] == 0 || h.firstWrite < multiFirst[h.multi]) {
			multiFirst[h.multi] = h.firstWrite
		}
	}
	covered := map[string]bool{} // every part had an accepted write
	for _, h := range holds {
		if h.multi != "" {
			c, seen := covered[h.multi]
			covered[h.multi] = (c || !seen) && h.firstWrite > 0
		}
	}
	for _, m := range multis {
		r.MultiCalls++
		if m.Res == ResAcquired {
			r.MultiAcquired++
		}
		if multiFirst[m.Holder] > 0 {
			r.MultiJudged++
		}
	}

	// (d) honesty: consecutive holds of a key. A part of a multi
	// acquisition is judged from the multi's first write (to any of its
	// keys), not its own: from then on no earlier holder of any of its keys
	// may still believe it holds it. (The writes of one multi acquisition
	// need not cover all its keys: its lease lost after some of them ends
	// its writes there, as it should. What all-or-none promises, and the
	// resource can show, is that once it wrote anything it held every key:
	// an earlier holder of one of them still believing then is a split
	// multi acquisition, MultiSplit; a later holder of one of them writing
	// while the multi still believed is a dishonest holder, as for any
	// hold. Both except a frozen holder and lost Redis data, as below.)
	byKey := map[string][]*holdSpan{}
	for _, h := range holds {
		byKey[h.key] = append(byKey[h.key], h)
	}
	r.semaphores(holds, frozen, stalls, lossAt)
	r.readWrite(holds, frozen, stalls, lossAt)
	for key, hs := range byKey {
		if shared(key) {
			continue // up to its permits hold it at once: judged by semaphores
		}
		sort.Slice(hs, func(i, j int) bool { return hs[i].acq < hs[j].acq })
		for j := 1; j < len(hs); j++ {
			y := hs[j]
			t := y.firstWrite
			if y.multi != "" {
				t = multiFirst[y.multi]
			}
			if t == 0 {
				continue // nothing written under it: nothing to protect
			}
			for i := j - 1; i >= 0 && i >= j-8; i-- {
				x := hs[i]
				if x.worker == y.worker || x.end <= t {
					continue
				}
				switch {
				case anyCovers(frozen[x.proc], t) || anyIn(frozen[x.proc], x.acq, t) || anyIn(stalls[x.proc], x.acq, t):
					// Frozen by a fault, or its process not run by the
					// machine (a stall): its watchdog could not end its
					// lease in time.
					r.FrozenOverlaps++
				case anyIn(lossAt, x.asked, y.acq):
					// From the call's start: a waiter's hold was granted in
					// Redis before its Lock returned (a frozen waiter's, long
					// before), and a restart in between loses it.
					r.StateLossOverlaps++
				case y.multi != "" && (y.firstWrite == 0 || x.end <= y.firstWrite):
					// Seen only from the multi's write to another key.
					r.MultiSplit = append(r.MultiSplit, fmt.Sprintf("%s: %s (fence %d) still held it until %s when %s (fence %d), holding it too, had begun writing its keys at %s",
						key, x.holder, x.fence, ts(x.end), y.multi, y.fence, ts(t)))
				default:
					r.Dishonest = append(r.Dishonest, fmt.Sprintf("%s: %s (fence %d) still held it until %s when %s (fence %d) wrote at %s",
						key, x.holder, x.fence, ts(x.end), y.holder, y.fence, ts(t)))
				}
			}
		}
	}

	// (c) deadlocks, (e) outcomes. A call Redis did not answer (or that
	// failed) may have taken the lock: it counts as held until the Locker
	// could undo it, Margin after Redis was back.
	unknown := map[string][]interval{}
	for _, c := range calls {
		if c.Op == "unlock" || c.Op == "extend" || c.Op == "reenter" || c.Res == ResAcquired {
			continue
		}
		if c.Res == ResBusy && (c.Op == "trylock" || !anyIn(frozen[c.proc()], c.Start, c.End)) {
			// A busy answer took nothing, unless its worker was frozen
			// while it waited in the queue: a release may then have
			// granted it the lock, which it gives back once it runs again.
			continue
		}
		// The undo can run once Redis answers and the worker runs: after
		// the call, after every hang that starts before the undo is done,
		// after its own pauses, and after the faults that slow, hold or cut
		// its replies (an undo is a call too). A worker killed first never
		// undoes: the lock expires by itself, TTL after Redis ran the
		// attempt.
		end := c.End
		delays := append(append([]interval(nil), hung...), frozen[c.proc()]...)
		for _, f := range faults {
			if slowOn(f, c.proc()) || f.Kind == FaultLateReply || f.Kind == FaultCut || f.Kind == FaultNodeNet {
				delays = append(delays, interval{f.Start, f.End})
			}
		}
		for moved := true; moved; {
			moved = false
			for _, h := range delays {
				if h.start <= end+int64(lim.Undo) && h.end > end && h.end >= c.Start {
					end, moved = h.end, true
				}
			}
		}
		u := interval{c.Start, end + int64(lim.Undo)}
		if t, ok := killedAt[c.proc()]; ok && t >= c.Start && t <= u.end {
			u.end = end + ttlOf(c, lim)
		}
		if c.Op == OpMulti && nodeFaulted(faults, c.Start, c.End) {
			// A key a failed multi request took is given back by a
			// release before it returns; a release Redis did not answer
			// leaves it to expire, TTL after its last renewal.
			u.end = max(u.end, end+ttlOf(c, lim))
		}
		unknown[c.Key] = append(unknown[c.Key], u)
	}
	for _, c := range died {
		// The worker died in the call (or the run ended): nothing undoes
		// what it may have taken; it expires TTL after Redis ran it.
		end := runEnd
		if t, ok := killedAt[c.proc()]; ok && t >= c.Start {
			end = t
		}
		for _, h := range hung {
			if h.start <= end && h.end > end {
				end = h.end
			}
		}
		unknown[c.Key] = append(unknown[c.Key], interval{c.Start, end + ttlOf(c, lim)})
	}
	// Redlock: with two of the three masters faulted at once no majority
	// answers, an outage. (Its "busy" can also come from another owner's
	// partial grants that it then gives back — a split. A give-back that
	// a faulted node does not receive leaves that node held by the other
	// call's owner to its TTL: with another node faulted, no majority can
	// form meanwhile, and busy is what Redis says.)
	outage = append(outage, overlapsOfTwoNodes(faults)...)
	partial := map[string][]ownedInterval{}
	if lim.Redlock {
		for _, c := range calls {
			if (c.Op == "lock" || c.Op == "trylock" || c.Op == "cancel" || c.Op == OpMulti) && nodeFaulted(faults, c.Start, c.End) {
				partial[c.Key] = append(partial[c.Key], ownedInterval{interval{c.Start, c.End + ttlOf(c, lim)}, c.Holder})
			}
		}
	}
	for _, c := range calls {
		window := ttlOf(c, lim) + int64(lim.Margin)
		if c.Op == "reenter" && strings.HasPrefix(c.Res, ResOther) {
			r.BadReentry = append(r.BadReentry, fmt.Sprintf("%s %s: %s", c.Holder, c.Key, c.Res))
		}
		if c.Op == "unlock" && c.Res == ResNotHeld {
			// Only a loss (told to the holder first), lost Redis data, a
			// frozen holder, or Redis unreachable long enough for the lock
			// to expire before the release ran may make a hold not held at
			// its release.
			// (or a path slow enough that the release ran after the TTL)
			// (or the request's context ended before the release ran: a
			// lease whose context ended is no longer renewed)
			// (or the release ran a TTL after the hold was last renewed, or
			// acquired: a process that did not run in time to renew it)
			if h := holds[c.Holder]; h != nil && !h.told && !(h.ends > 0 && c.End >= h.ends) && c.End < max(h.asked, renewed[keyFence{h.key, h.fence}], extended[c.Holder])+h.ttl && !anyIn(lossAt, h.asked, c.End) && !anyIn(frozen[c.proc()], h.asked, c.End) &&
				!anyIn(outage, h.asked, c.End) && !slowDuring(faults, c.proc(), h.asked, c.End) &&
				!(lim.Redlock && redlockCopiesLost(faults, partial[c.Key], byKey[c.Key], h, c.End)) {
				r.UnlockLies = append(r.UnlockLies, fmt.Sprintf("%s %s: Unlock at %s said not held, and nothing had ended the hold", c.Holder, c.Key, ts(c.Start)))
			}
		}
		if c.Op == OpRW {
			r.RWCalls++
			if c.Read {
				r.RWReads++
			}
			switch c.Res {
			case ResAcquired:
				r.RWAcquired++
			case ResBusy:
				r.RWBusy++
			}
		}
		if c.Op == OpSem {
			r.SemCalls++
			r.SemPermits = max(r.SemPermits, c.N)
			switch c.Res {
			case ResAcquired:
				r.SemAcquired++
			case ResBusy:
				r.SemBusy++
			}
		}
		if c.Op == "lock" || c.Op == "trylock" || c.Op == "cancel" {
			r.Calls++
			switch {
			case c.Res == ResAcquired:
				r.Acquired++
			case c.Res == ResBusy:
				r.Busy++
			case c.Res == ResUnavailable:
				r.Unavailable++
			case c.Res == ResCanceled || c.Res == ResDeadline:
				r.Canceled++
			default:
				r.Other++
			}
		}
		froze := anyIn(frozen[c.proc()], c.Start, c.End)
		r.overlong(c, faults, froze, stalls[c.proc()], lim)
		if c.Res == ResBusy && (c.Op == "lock" || c.Op == "trylock" || c.Op == "cancel" || c.Op == OpMulti || c.Op == OpSem || c.Op == OpRW) {
			for _, h := range hung {
				if h.start <= c.Start && c.End <= h.end && !froze {
					r.BusyWhenHung = append(r.BusyWhenHung, fmt.Sprintf("%s %s %s answered busy from %s to %s while Redis was hung", c.Worker, c.Op, c.Key, ts(c.Start), ts(c.End)))
				}
			}
			if !froze && heldNearN(byKey[c.Key], unknown[c.Key], c.End, int64(lim.Margin)) < max(c.N, 1) && !anyIn(lossAt, c.End-window, c.End) &&
				!othersNear(partial[c.Key], c.Holder, c.End) {
				if c.Op == OpSem {
					r.Deadlocks = append(r.Deadlocks, fmt.Sprintf("%s %s %s answered busy at %s, but fewer than its %d permits could still be held in Redis", c.Worker, c.Op, c.Key, ts(c.End), c.N))
				} else {
					r.Deadlocks = append(r.Deadlocks, fmt.Sprintf("%s %s %s answered busy at %s, but no hold of it could still be in Redis", c.Worker, c.Op, c.Key, ts(c.End)))
				}
			}
		}
		for _, h := range hung {
			if h.start <= c.Start && c.Start <= h.end && (c.Op == "lock" || c.Op == "trylock") {
				r.HungDuration = append(r.HungDuration, time.Duration(c.End-c.Start))
			}
		}
	}

	for _, m := range multis {
		r.overlong(m, faults, anyIn(frozen[m.proc()], m.Start, m.End), stalls[m.proc()], lim)
	}
	for _, ok := range covered {
		if ok {
			r.MultiCovered++
		}
	}

	r.liveness(&history{events: events, calls: calls, holds: holds, faults: faults, frozen: frozen, stalls: stalls, killedAt: killedAt, unknown: unknown, lossAt: lossAt, lim: lim})

	// Recovery after each fault: the time until every key had been
	// acquired again.
	acqs := map[string][]int64{}
	for _, h := range holds {
		acqs[h.key] = append(acqs[h.key], h.acq)
	}
	for _, a := range acqs {
		slices.Sort(a)
	}
	for _, f := range faults {
		var worst int64
		ok := true
		for _, a := range acqs {
			i, _ := slices.BinarySearch(a, f.End)
			if i == len(a) {
				ok = false // the run ended first
				break
			}
			worst = max(worst, a[i]-f.End)
		}
		if ok {
			r.Recovery[f.Kind] = max(r.Recovery[f.Kind], time.Duration(worst))
		}
	}
	return r
}

// overlong flags call c if it returned later than its budget plus the
// bound, its worker not frozen, the time its process stalled during the
// call not counted.
func (r *Report) overlong(c Event, faults []Fault, froze bool, stalls []interval, lim Limits) {
	took := c.End - c.Start - overlap(stalls, c.Start, c.End)
	if c.Budget > 0 && took > c.Budget+int64(lim.Bound) && !froze {
		r.Overlong = append(r.Overlong, fmt.Sprintf("%s %s %s took %v from %s (%s), budget %v, during %s", c.Worker, c.Op, c.Key,
			time.Duration(c.End-c.Start), ts(c.Start), c.Res, time.Duration(c.Budget), during(faults, c.Start, c.End)))
	}
}

// overlap is how much of [from, to] the intervals cover (they do not
// overlap each other: one process's stalls).
func overlap(ivs []interval, from, to int64) int64 {
	var sum int64
	for _, iv := range ivs {
		if a, b := max(iv.start, from), min(iv.end, to); b > a {
			sum += b - a
		}
	}
	return sum
}

// multiParts is a multi request's call (or its Unlock's, or the begin of
// one its worker died in) as the checker judges it: one call per key, by
// the part's holder. A busy answer is its busy key's (the key named in
// Why); the other keys were given back before it returned, if taken, and
// count as an abandoned attempt's. The parts carry no budget: the whole
// call's is judged once. Any other event is returned as it is.
func multiParts(e Event) []Event {
	if e.Op != OpMulti && (e.Op != "unlock" || !strings.Contains(e.Key, ",")) {
		return []Event{e}
	}
	var out []Event
	for _, k := range strings.Split(e.Key, ",") {
		p := e
		p.Key, p.Holder, p.Budget = k, partHolder(e.Holder, k), 0
		if e.Op == OpMulti && e.Res == ResBusy && k != e.Why {
			p.Res = ResGivenBack
		}
		out = append(out, p)
	}
	return out
}

// interleavings lists, per key (not a semaphore's), the accepted writes by a holder whose fence
// is not above that of the previous accepted writer (another holder): two
// holders with one fence, or a holder that came back after another wrote.
func interleavings(writes []Write) []string {
	var out []string
	type last struct {
		holder string
		fence  int64
	}
	prev := map[string]last{}
	for _, w := range writes {
		if !w.Accepted || shared(w.Key) {
			continue
		}
		p, ok := prev[w.Key]
		if ok && p.holder != w.Holder && w.Fence <= p.fence {
			out = append(out, fmt.Sprintf("%s: %s (fence %d) wrote at %s after %s (fence %d)", w.Key, w.Holder, w.Fence, ts(w.At), p.holder, p.fence))
		}
		prev[w.Key] = last{w.Holder, w.Fence}
	}
	return out
}

// heldNearN counts the holds of the key that may still be in Redis at t:
// from its acquiring call's start until it is surely gone (plus margin),
// and the calls whose outcome was unknown, until margin after the Locker
// could undo them. (A lock's busy answer needs one; a semaphore's, its
// permits.)
func heldNearN(hs []*holdSpan, unknown []interval, t, margin int64) int {
	n := 0
	for _, h := range hs {
		if h.asked <= t && h.gone()+margin >= t {
			n++
		}
	}
	for _, u := range unknown {
		if u.start <= t && u.end >= t-margin {
			n++
		}
	}
	return n
}

func anyCovers(ivs []interval, t int64) bool {
	for _, iv := range ivs {
		if iv.covers(t) {
			return true
		}
	}
	return false
}

// anyIn reports whether some interval overlaps [a, b].
func anyIn(ivs []interval, a, b int64) bool {
	for _, iv := range ivs {
		if iv.start <= b && iv.end >= a {
			return true
		}
	}
	return false
}

// during names the faults that overlap [a, b].
func during(faults []Fault, a, b int64) string {
	var kinds []string
	for _, f := range faults {
		if f.Start <= b && f.End >= a {
			kinds = append(kinds, f.Kind)
		}
	}
	if len(kinds) == 0 {
		return "no fault"
	}
	return strings.Join(kinds, ",")
}

func ts(t int64) string { return time.Unix(0, t).Format("15:04:05.000000") }

// nodeFaulted reports whether a fault that can keep one node from
// answering (a restart, a hang, a cut or held reply) overlapped [a, b].
func nodeFaulted(faults []Fault, a, b int64) bool { return faultedUntil(faults, a, b) > 0 }

// faultedUntil is the latest end of such a fault overlapping [a, b] (0:
// none).
func faultedUntil(faults []Fault, a, b int64) int64 {
	var until int64
	for _, f := range faults {
		if downFault(f) && f.Start <= b && f.End >= a {
			until = max(until, f.End)
		}
	}
	return until
}

// hungUntil is the latest end of a Redlock node's hang that overlaps [a, b]
// (0: none): a command sent into it in [a, b] runs then.
func hungUntil(faults []Fault, a, b int64) int64 {
	var until int64
	for _, f := range faults {
		if f.Kind == FaultNodeHang && f.Start <= b && f.End >= a {
			until = max(until, f.End)
		}
	}
	return until
}

// ownedInterval is when a call's owner may hold a lock on some node.
type ownedInterval struct {
	interval
	holder string
}

// othersNear reports whether another call than holder's may hold the lock
// on some node at t.
func othersNear(ivs []ownedInterval, holder string, t int64) bool {
	for _, iv := range ivs {
		if iv.holder != holder && iv.covers(t) {
			return true
		}
	}
	return false
}

// redlockCopiesLost reports whether h's copies on two masters may have
// gone while it was held, which loses a Redlock lease however its renewals
// go: two masters faulted in its time (a restart empties one, a hang or
// cut longer than the lease lets its copy expire, and a renewal restores a
// copy only while a quorum still holds it), or one faulted while another
// master was held by someone else's minority copy when h was acquired (the
// acquire then got exactly a majority, one of which the fault took).
func redlockCopiesLost(faults []Fault, partial []ownedInterval, others []*holdSpan, h *holdSpan, end int64) bool {
	nodes := map[string]bool{}
	for _, f := range faults {
		switch f.Kind {
		case FaultNodeRestart, FaultNodeHang, FaultNodeNet:
			if downFault(f) && f.Start <= end && f.End >= h.asked {
				nodes[f.Target] = true
			}
		}
	}
	if len(nodes) >= 2 {
		return true
	}
	if len(nodes) == 0 {
		return false
	}
	if othersNear(partial, h.holder, h.acq) {
		return true
	}
	for _, o := range others {
		if o != h && o.minority > 0 && o.unlockAt <= h.acq && o.minority >= h.acq {
			return true
		}
	}
	return false
}
