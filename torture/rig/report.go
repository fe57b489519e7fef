package rig

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Print writes the summary table and the closing line.
func (r *Report) Print(w io.Writer, seed int64, d time.Duration) {
	fmt.Fprintf(w, "\nseed %d, %v\n", seed, d.Round(time.Second))
	fmt.Fprintf(w, "operations  Lock/TryLock %d: acquired %d, busy %d, unavailable %d, cancelled %d, other %d; writes logged %d (%d unreached); received %d: accepted %d, rejected by fencing %d\n",
		r.Calls, r.Acquired, r.Busy, r.Unavailable, r.Canceled, r.Other, r.Writes, r.Unreached, r.Accepted+r.Rejected, r.Accepted, r.Rejected)
	if r.MultiCalls > 0 {
		fmt.Fprintf(w, "multi       LockMulti %d: acquired %d; judged (a write accepted) %d, of which on every key %d; split %d\n",
			r.MultiCalls, r.MultiAcquired, r.MultiJudged, r.MultiCovered, len(r.MultiSplit))
	}
	if r.SemCalls > 0 {
		fmt.Fprintf(w, "semaphore   Semaphore %d (%d permits): acquired %d, busy %d; judged (a write accepted) %d, most holders believing at once %d; fence pairs compared %d; overfull %d, fence breaks %d\n",
			r.SemCalls, r.SemPermits, r.SemAcquired, r.SemBusy, r.SemJudged, r.SemHoldersMax, r.SemFencePairs, len(r.SemOverfull), len(r.SemFences))
	}
	if r.RWCalls > 0 {
		fmt.Fprintf(w, "read-write  RLock/Lock %d (%d readers): acquired %d, busy %d; judged (a write accepted) %d, most readers believing at once %d; fence pairs compared %d; breaks %d, fence breaks %d\n",
			r.RWCalls, r.RWReads, r.RWAcquired, r.RWBusy, r.RWJudged, r.RWReadersMax, r.RWFencePairs, len(r.RWBreaks), len(r.RWFences))
	}
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	fmt.Fprintf(w, "faults      %d:", r.FaultTotal())
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, r.Faults[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "violations  fenced interleaving %d, writes after loss %d, dishonest holders %d, split multi %d, busy while hung %d, calls past budget %d, bad re-entries %d, unlock lies %d, dishonest unavailable %d, semaphore overfull %d, semaphore fence breaks %d, read-write breaks %d, read-write fence breaks %d; deadlocks %d\n",
		len(r.Interleaved), len(r.WriteAfter), len(r.Dishonest), len(r.MultiSplit), len(r.BusyWhenHung), len(r.Overlong), len(r.BadReentry), len(r.UnlockLies), len(r.DishonestUnavailable), len(r.SemOverfull), len(r.SemFences), len(r.RWBreaks), len(r.RWFences), len(r.Deadlocks))
	fmt.Fprintf(w, "overlaps    without fencing %d (stale writes: a lower fence than the key had seen); holders still believing when the next wrote, explained: frozen or unscheduled %d, Redis data lost %d\n",
		r.OverlapsUnfenced, r.FrozenOverlaps, r.StateLossOverlaps)
	fmt.Fprintf(w, "unscheduled %d stretches of 100ms+ in which a worker process did not run (longest %v; not counted against budgets)\n",
		r.Unscheduled, r.LongestUnscheduled.Round(time.Millisecond))
	fmt.Fprintf(w, "recovery    max time until every key was acquired again:")
	for _, k := range kinds {
		if d, ok := r.Recovery[k]; ok {
			fmt.Fprintf(w, " %s %v", k, d.Round(time.Millisecond))
		}
	}
	fmt.Fprintln(w)
	if n := len(r.HungDuration); n > 0 {
		s := slices.Clone(r.HungDuration)
		slices.Sort(s)
		fmt.Fprintf(w, "while hung  %d Lock/TryLock calls: p50 %v, p99 %v, max %v\n", n,
			s[n/2].Round(time.Millisecond), s[n*99/100].Round(time.Millisecond), s[n-1].Round(time.Millisecond))
	}
	fmt.Fprintf(w, "liveness    stalls %d, FIFO breaks %d; judged: %d waits, %d later arrivals",
		len(r.Stalls), len(r.FIFOBreaks), r.CheckedWaits, r.CheckedPairs)
	if n := len(r.Handoffs); n > 0 {
		s := slices.Clone(r.Handoffs)
		slices.Sort(s)
		fmt.Fprintf(w, "; %d handoffs: p50 %v, p99 %v, max %v", n, s[n/2].Round(time.Microsecond), s[n*99/100].Round(time.Microsecond), s[n-1].Round(time.Microsecond))
	}
	fmt.Fprintln(w)
	for _, list := range [][]string{r.Interleaved, r.WriteAfter, r.Dishonest, r.MultiSplit, r.BusyWhenHung, r.Overlong, r.BadReentry, r.UnlockLies, r.DishonestUnavailable, r.SemOverfull, r.SemFences, r.RWBreaks, r.RWFences, r.Deadlocks, r.Stalls, r.FIFOBreaks} {
		for i, s := range list {
			if i == 5 {
				fmt.Fprintf(w, "  ... and %d more\n", len(list)-5)
				break
			}
			fmt.Fprintln(w, "  "+s)
		}
	}
	fmt.Fprintf(w, "faults=%d violations=%d stalls=%d fifo_breaks=%d deadlocks=%d overlaps_unfenced=%d\n",
		r.FaultTotal(), r.Violations(), len(r.Stalls), len(r.FIFOBreaks), len(r.Deadlocks), r.OverlapsUnfenced)
}
