package rig

import (
	"testing"
	"time"
)

// The checker on made-up histories: each rule flags the case it names and
// lets the explained one pass.
func TestCheckRules(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := Limits{TTL: 500 * time.Millisecond, Margin: 250 * time.Millisecond, Undo: 100 * time.Millisecond, Bound: 300 * time.Millisecond}
	acq := func(w, h string, start, end int, fence int64) Event {
		return Event{Ev: "call", Worker: w, Key: "k", Holder: h, Op: "lock", Start: ms(start), End: ms(end), Budget: int64(time.Second), Res: ResAcquired, Fence: fence}
	}
	end := func(w, h string, at int) Event {
		return Event{Ev: "end", Worker: w, Key: "k", Holder: h, End: ms(at), Why: "unlock"}
	}
	write := func(seq int64, h string, at int, fence int64, ok bool) Write {
		return Write{Seq: seq, At: ms(at), Key: "k", Holder: h, Fence: fence, Live: true, Accepted: ok}
	}
	busy := func(w string, start, stop int) Event {
		return Event{Ev: "call", Worker: w, Key: "k", Op: "lock", Start: ms(start), End: ms(stop), Budget: int64(time.Second), Res: ResBusy}
	}

	t.Run("clean handoff", func(t *testing.T) {
		r := Check([]Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), acq("b", "b#1", 90, 101, 20), end("b", "b#1", 200)},
			[]Write{write(1, "a#1", 50, 10, true), write(2, "b#1", 150, 20, true)}, nil, lim)
		if r.Violations() != 0 || len(r.Deadlocks) != 0 {
			t.Fatalf("violations %d deadlocks %v", r.Violations(), r.Deadlocks)
		}
	})
	overlap := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 300), acq("b", "b#1", 90, 101, 20), end("b", "b#1", 400)}
	overlapWrites := []Write{write(1, "a#1", 50, 10, true), write(2, "b#1", 150, 20, true), write(3, "a#1", 250, 10, false)}
	t.Run("dishonest", func(t *testing.T) {
		r := Check(overlap, overlapWrites, nil, lim)
		if len(r.Dishonest) != 1 || r.OverlapsUnfenced != 1 || len(r.Interleaved) != 0 {
			t.Fatalf("dishonest %v, stale %d, interleaved %v", r.Dishonest, r.OverlapsUnfenced, r.Interleaved)
		}
	})
	t.Run("frozen holder explains it", func(t *testing.T) {
		r := Check(overlap, overlapWrites, []Fault{{Kind: FaultPause, Target: "a", Start: ms(60), End: ms(240)}}, lim)
		if len(r.Dishonest) != 0 || r.FrozenOverlaps != 1 {
			t.Fatalf("dishonest %v, frozen %d", r.Dishonest, r.FrozenOverlaps)
		}
	})
	t.Run("lost Redis data explains it", func(t *testing.T) {
		r := Check(overlap, overlapWrites, []Fault{{Kind: FaultRestart, Start: ms(60), End: ms(80)}}, lim)
		if len(r.Dishonest) != 0 || r.StateLossOverlaps != 1 {
			t.Fatalf("dishonest %v, state loss %d", r.Dishonest, r.StateLossOverlaps)
		}
	})
	t.Run("interleaving accepted", func(t *testing.T) {
		r := Check(overlap, []Write{write(1, "a#1", 50, 0, true), write(2, "b#1", 150, 0, true)}, nil, lim)
		if len(r.Interleaved) != 1 {
			t.Fatalf("interleaved %v: two holders with one fence", r.Interleaved)
		}
	})
	t.Run("deadlock", func(t *testing.T) {
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), busy("b", 3000, 3001)}
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: busy 2.9s after the only holder stopped", r.Deadlocks)
		}
		ev[2] = busy("b", 800, 801) // within TTL + margin: the lock may still expire
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v within TTL+margin", r.Deadlocks)
		}
		unknown := Event{Ev: "call", Worker: "c", Key: "k", Op: "lock", Start: ms(2700), End: ms(2800), Budget: int64(time.Second), Res: ResUnavailable}
		if r := Check(append(ev[:2:2], unknown, busy("b", 3000, 3001)), nil, nil, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v just after an attempt of unknown outcome", r.Deadlocks)
		}
		if r := Check(append(ev[:2:2], unknown, busy("b", 3300, 3301)), nil, nil, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: busy long after the unknown attempt could have been undone", r.Deadlocks)
		}
	})
	t.Run("busy while hung, and past budget", func(t *testing.T) {
		hang := []Fault{{Kind: FaultHangLong, Start: ms(1000), End: ms(2000)}}
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 1500), busy("b", 1100, 1900), busy("c", 0, 1500)}
		r := Check(ev, nil, hang, lim)
		if len(r.BusyWhenHung) != 1 || len(r.Overlong) != 1 {
			t.Fatalf("busy while hung %v, past budget %v", r.BusyWhenHung, r.Overlong)
		}
	})
	t.Run("unlock lies", func(t *testing.T) {
		unlock := Event{Ev: "call", Worker: "a", Key: "k", Holder: "a#1", Op: "unlock", Start: ms(100), End: ms(101), Res: ResNotHeld}
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), unlock}
		if r := Check(ev, nil, nil, lim); len(r.UnlockLies) != 1 {
			t.Fatalf("unlock lies %v: not held, and nothing had ended the hold", r.UnlockLies)
		}
		lost := Event{Ev: "end", Worker: "a", Key: "k", Holder: "a#1", End: ms(50), Why: "lost"}
		if r := Check([]Event{ev[0], lost, ev[1], unlock}, nil, nil, lim); len(r.UnlockLies) != 0 {
			t.Fatalf("unlock lies %v after the holder was told of the loss", r.UnlockLies)
		}
	})
	t.Run("write after loss", func(t *testing.T) {
		ev := []Event{{Ev: "write", Worker: "a", Key: "k", Holder: "a#1", Start: ms(5), End: ms(6), Live: false}}
		if r := Check(ev, nil, nil, lim); len(r.WriteAfter) != 1 {
			t.Fatalf("writes after loss %v", r.WriteAfter)
		}
	})
}
