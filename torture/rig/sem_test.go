package rig

import (
	"slices"
	"testing"
	"time"
)

// The semaphore rules on made-up histories (2 permits): each flags the case
// it names and lets the explained one pass.
func TestCheckSemaphore(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := Limits{TTL: 500 * time.Millisecond, Margin: 250 * time.Millisecond, Undo: 100 * time.Millisecond, Bound: 300 * time.Millisecond, Stall: 150 * time.Millisecond, Settle: time.Second}
	key := semKey("k")
	acq := func(w string, start, end int, fence int64) Event {
		return Event{Ev: "call", Worker: w, Key: key, Holder: w + "#1", Op: OpSem, Start: ms(start), End: ms(end), Budget: int64(time.Second), Res: ResAcquired, Fence: fence, N: 2}
	}
	end := func(w string, at int) Event {
		return Event{Ev: "end", Worker: w, Key: key, Holder: w + "#1", End: ms(at), Why: "unlock"}
	}
	write := func(seq int64, w string, at int, fence int64) Write {
		return Write{Seq: seq, At: ms(at), Key: key, Holder: w + "#1", Fence: fence, Live: true, Accepted: true}
	}
	// a, b and c hold from 1, 11, 21 to 300; each writes 10ms after.
	three := []Event{acq("a", 0, 1, 10), acq("b", 10, 11, 20), acq("c", 20, 21, 30), end("a", 300), end("b", 300), end("c", 300)}
	writes := []Write{write(1, "a", 11, 10), write(2, "b", 21, 20), write(3, "c", 31, 30)}

	t.Run("two holders, lower fences written after higher: clean", func(t *testing.T) {
		ev := []Event{acq("a", 0, 1, 10), acq("b", 10, 11, 20), end("a", 300), end("b", 300), acq("c", 310, 311, 30), end("c", 400)}
		ws := []Write{write(1, "b", 21, 20), write(2, "a", 22, 10), write(3, "c", 320, 30)}
		r := Check(ev, ws, nil, lim)
		if r.Violations() != 0 || r.SemHoldersMax != 2 || r.SemJudged != 3 || r.SemFencePairs != 3 {
			t.Fatalf("violations %d (%v %v), holders max %d, judged %d, fence pairs %d", r.Violations(), r.SemOverfull, r.SemFences, r.SemHoldersMax, r.SemJudged, r.SemFencePairs)
		}
	})
	t.Run("three holders of two permits", func(t *testing.T) {
		r := Check(three, writes, nil, lim)
		if len(r.SemOverfull) != 2 || r.SemHoldersMax != 3 { // at b's write and at c's
			t.Fatalf("overfull %v, holders max %d", r.SemOverfull, r.SemHoldersMax)
		}
	})
	t.Run("a frozen holder explains it", func(t *testing.T) {
		r := Check(three, writes, []Fault{{Kind: FaultPause, Target: "a", Start: ms(5), End: ms(200)}}, lim)
		if len(r.SemOverfull) != 0 || r.FrozenOverlaps != 2 || r.SemHoldersMax != 2 {
			t.Fatalf("overfull %v, frozen %d, holders max %d", r.SemOverfull, r.FrozenOverlaps, r.SemHoldersMax)
		}
	})
	t.Run("an unscheduled holder explains it", func(t *testing.T) {
		stall := Event{Ev: "stall", Worker: "a", Start: ms(5), End: ms(150)}
		r := Check(append(three[:len(three):len(three)], stall), writes, nil, lim)
		if len(r.SemOverfull) != 0 || r.FrozenOverlaps != 2 {
			t.Fatalf("overfull %v, frozen %d", r.SemOverfull, r.FrozenOverlaps)
		}
	})
	t.Run("lost Redis data explains it", func(t *testing.T) {
		r := Check(three, writes, []Fault{{Kind: FaultRestart, Start: ms(15), End: ms(16)}}, lim)
		if len(r.SemOverfull) != 0 || r.StateLossOverlaps == 0 {
			t.Fatalf("overfull %v, state loss %d", r.SemOverfull, r.StateLossOverlaps)
		}
	})
	t.Run("fences", func(t *testing.T) {
		// b asked after a returned, with a lower fence; c with a's.
		ev := []Event{acq("a", 0, 1, 10), acq("b", 10, 11, 5), end("a", 50), end("b", 50), acq("c", 100, 101, 10), end("c", 150)}
		if r := Check(ev, nil, nil, lim); len(r.SemFences) != 3 { // b after a, c's fence a's (the pair and the duplicate)
			t.Fatalf("fence breaks %v", r.SemFences)
		}
		// Asked before the other returned: either may have been granted first.
		ev[1] = acq("b", 0, 11, 5)
		ev[4] = acq("c", 100, 101, 30)
		if r := Check(ev, nil, nil, lim); len(r.SemFences) != 0 {
			t.Fatalf("fence breaks %v of permits granted in either order", r.SemFences)
		}
		ev[1] = acq("b", 10, 11, 5)
		if r := Check(ev, nil, []Fault{{Kind: FaultRestart, Start: ms(5), End: ms(6)}}, lim); len(r.SemFences) != 0 {
			t.Fatalf("fence breaks %v across lost Redis data", r.SemFences)
		}
	})
	t.Run("busy with a permit free", func(t *testing.T) {
		busy := Event{Ev: "call", Worker: "c", Key: key, Holder: "c#1", Op: OpSem, Start: ms(100), End: ms(101), Budget: int64(time.Second), Res: ResBusy, N: 2}
		ev := []Event{acq("a", 0, 1, 10), acq("b", 10, 11, 20), busy}
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v with both permits held", r.Deadlocks)
		}
		ev = []Event{acq("a", 0, 1, 10), busy}
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: busy with one of two permits held", r.Deadlocks)
		}
	})
	t.Run("locks are not judged as permits", func(t *testing.T) {
		// A lock of the same name held beside the permits: three holds of
		// "k" at once, two of them permits.
		lock := Event{Ev: "call", Worker: "d", Key: "k", Holder: "d#1", Op: "lock", Start: ms(0), End: ms(1), Budget: int64(time.Second), Res: ResAcquired, Fence: 15}
		ev := []Event{acq("a", 0, 1, 10), acq("b", 10, 11, 20), lock, end("a", 300), end("b", 300), {Ev: "end", Worker: "d", Key: "k", Holder: "d#1", End: ms(300)}}
		ws := []Write{write(1, "a", 11, 10), write(2, "b", 21, 20), {Seq: 3, At: ms(30), Key: "k", Holder: "d#1", Fence: 15, Live: true, Accepted: true}}
		if r := Check(ev, ws, nil, lim); r.Violations() != 0 {
			t.Fatalf("violations %d: %v %v %v", r.Violations(), r.SemOverfull, r.SemFences, r.Dishonest)
		}
	})
}

func TestAtLeast(t *testing.T) {
	ivs := []interval{{0, 10}, {5, 15}, {12, 20}, {20, 30}}
	for _, c := range []struct {
		n    int
		want []interval
	}{
		{1, []interval{{0, 30}}},
		{2, []interval{{5, 10}, {12, 15}}},
		{3, nil},
	} {
		if got := atLeast(ivs, c.n); !slices.Equal(got, c.want) {
			t.Errorf("atLeast(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// The liveness rules on a semaphore of 2 permits: a waiter queued while
// both are held, granted promptly when one is released, is no stall; left
// waiting while one is free it is; overtaken by a later arrival it is no
// FIFO break (not judged for permits).
func TestSemaphoreLiveness(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := DefaultLimits(500 * time.Millisecond)
	key := semKey("k")
	sem := func(w string, start, end int, res string) Event {
		return Event{Ev: "call", Worker: w, Key: key, Holder: w + "#1", Op: OpSem, Start: ms(start), End: ms(end), Budget: int64(5 * time.Second), TTL: int64(500 * time.Millisecond), Res: res, Fence: int64(start + 1), N: 2}
	}
	ev := func(kind, w string, at int) Event {
		e := Event{Ev: kind, Worker: w, Key: key, Holder: w + "#1", Start: ms(at), End: ms(at), Why: "unlock"}
		if kind == "unlock" {
			e = Event{Ev: "call", Worker: w, Key: key, Holder: w + "#1", Op: "unlock", Start: ms(at), End: ms(at + 1), Res: ResOK}
		}
		return e
	}
	// a holds 0–100, b 0–bEnd; c queues at 10 and returns with a permit at cAcq.
	history := func(bEnd, cAcq int) []Event {
		return []Event{sem("a", 0, 1, ResAcquired), sem("b", 0, 2, ResAcquired), ev("queued", "c", 10),
			ev("end", "a", 100), ev("unlock", "a", 100), ev("end", "b", bEnd), ev("unlock", "b", bEnd),
			sem("c", 9, cAcq, ResAcquired), ev("end", "c", cAcq+10), ev("unlock", "c", cAcq+10)}
	}
	if r := Check(history(1000, 102), nil, nil, lim); len(r.Stalls) != 0 || r.CheckedWaits != 1 {
		t.Errorf("prompt grant: stalls %v, judged %d", r.Stalls, r.CheckedWaits)
	}
	if r := Check(history(1000, 400), nil, nil, lim); len(r.Stalls) != 1 {
		t.Errorf("stalls %v: a permit free 299ms while c waited", r.Stalls)
	}
	// d begins at 50 and is granted at 101, before c returns at 102.
	over := append(history(1000, 102), sem("d", 50, 101, ResAcquired), Event{Ev: "end", Worker: "d", Key: key, Holder: "d#1", End: ms(110)})
	if r := Check(over, nil, nil, lim); len(r.FIFOBreaks) != 0 || len(r.Stalls) != 0 {
		t.Errorf("FIFO breaks %v, stalls %v", r.FIFOBreaks, r.Stalls)
	}
}
