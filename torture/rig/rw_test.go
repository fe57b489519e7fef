package rig

import (
	"testing"
	"time"
)

// The read-write rules on made-up histories: readers side by side are
// clean, a writer beside a reader (either writing) is a break, a frozen
// holder explains it, fences are held to grant order.
func TestCheckReadWrite(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := Limits{TTL: 500 * time.Millisecond, Margin: 250 * time.Millisecond, Undo: 100 * time.Millisecond, Bound: 300 * time.Millisecond, Stall: 150 * time.Millisecond, Settle: time.Second}
	key := rwKey("k")
	acq := func(w string, read bool, start, end int, fence int64) Event {
		return Event{Ev: "call", Worker: w, Key: key, Holder: w + "#1", Op: OpRW, Start: ms(start), End: ms(end), Budget: int64(time.Second), Res: ResAcquired, Fence: fence, N: 1, Read: read}
	}
	end := func(w string, at int) Event {
		return Event{Ev: "end", Worker: w, Key: key, Holder: w + "#1", End: ms(at), Why: "unlock"}
	}
	write := func(seq int64, w string, at int, fence int64) Write {
		return Write{Seq: seq, At: ms(at), Key: key, Holder: w + "#1", Fence: fence, Live: true, Accepted: true}
	}
	// a and b hold from 1 and 11 to 300; a writes at 5 (alone), b at 21.
	pair := func(aRead, bRead bool) []Event {
		return []Event{acq("a", aRead, 0, 1, 10), acq("b", bRead, 10, 11, 20), end("a", 300), end("b", 300)}
	}
	writes := []Write{write(1, "a", 5, 10), write(2, "b", 21, 20)}

	t.Run("two readers: clean", func(t *testing.T) {
		r := Check(pair(true, true), writes, nil, lim)
		if r.Violations() != 0 || r.RWReadersMax != 2 || r.RWJudged != 2 || r.RWFencePairs != 1 {
			t.Fatalf("violations %d (%v %v), readers max %d, judged %d, fence pairs %d", r.Violations(), r.RWBreaks, r.RWFences, r.RWReadersMax, r.RWJudged, r.RWFencePairs)
		}
	})
	for _, c := range []struct {
		name         string
		aRead, bRead bool
	}{{"a writer, then a reader", false, true}, {"a reader, then a writer", true, false}, {"two writers", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(pair(c.aRead, c.bRead), writes, nil, lim)
			if len(r.RWBreaks) != 1 { // at b's write, a still believing
				t.Fatalf("breaks %v", r.RWBreaks)
			}
		})
	}
	t.Run("a frozen holder explains it", func(t *testing.T) {
		r := Check(pair(false, true), writes, []Fault{{Kind: FaultPause, Target: "a", Start: ms(5), End: ms(200)}}, lim)
		if len(r.RWBreaks) != 0 || r.FrozenOverlaps != 1 {
			t.Fatalf("breaks %v, frozen %d", r.RWBreaks, r.FrozenOverlaps)
		}
	})
	t.Run("fences", func(t *testing.T) {
		// b asked after a returned, with a lower fence.
		ev := []Event{acq("a", true, 0, 1, 10), acq("b", true, 10, 11, 5), end("a", 50), end("b", 50)}
		if r := Check(ev, nil, nil, lim); len(r.RWFences) != 1 {
			t.Fatalf("fence breaks %v", r.RWFences)
		}
	})
}
