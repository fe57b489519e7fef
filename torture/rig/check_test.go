package rig

import (
	"strings"
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
	t.Run("writes logged and received", func(t *testing.T) {
		// a's write reached the resource twice (re-sent after a lost reply:
		// one accepted, the copy rejected) and its worker logged it once; b's
		// was refused a connection ("E"); c's worker was killed after its
		// write was accepted and logged nothing.
		logged := func(h string, at int, res string) Event {
			return Event{Ev: "write", Worker: h[:1], Key: "k", Holder: h, Start: ms(at), End: ms(at + 1), Live: true, Res: res}
		}
		r := Check([]Event{logged("a#1", 50, "A"), logged("b#1", 60, "E")},
			[]Write{write(1, "a#1", 50, 10, true), write(2, "a#1", 51, 10, false), write(3, "c#1", 70, 30, true)}, nil, lim)
		if r.Writes != 2 || r.Unreached != 1 || r.Accepted != 2 || r.Rejected != 1 {
			t.Fatalf("writes logged %d (unreached %d), accepted %d, rejected %d: want 2 (1), 2, 1", r.Writes, r.Unreached, r.Accepted, r.Rejected)
		}
		var out strings.Builder
		r.Print(&out, 1, time.Second)
		if want := "writes logged 2 (1 unreached); received 3: accepted 2, rejected by fencing 1"; !strings.Contains(out.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, out.String())
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
	t.Run("an unscheduled holder explains it", func(t *testing.T) {
		// a's process did not run from 20 to 140 (a stall it logged): its
		// watchdog could not end its lease before b got the lock.
		stall := Event{Ev: "stall", Worker: "a", Start: ms(20), End: ms(140)}
		r := Check(append(overlap[:len(overlap):len(overlap)], stall), overlapWrites, nil, lim)
		if len(r.Dishonest) != 0 || r.FrozenOverlaps != 1 {
			t.Fatalf("dishonest %v, frozen %d", r.Dishonest, r.FrozenOverlaps)
		}
		stall.Worker = "c" // control: another process's stall explains nothing
		if r := Check(append(overlap[:len(overlap):len(overlap)], stall), overlapWrites, nil, lim); len(r.Dishonest) != 1 {
			t.Fatalf("dishonest %v: another process stalled", r.Dishonest)
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
		// The undo is a call too: c's replies slowed to 3400 (its path, or
		// every worker's replies held) may hold the unknown attempt's lock
		// until then.
		for _, f := range []Fault{{Kind: FaultWorkerLatency, Target: "c", Start: ms(2750), End: ms(3400)}, {Kind: FaultLateReply, Start: ms(2750), End: ms(3400)}} {
			if r := Check(append(ev[:2:2], unknown, busy("b", 3300, 3301)), nil, []Fault{f}, lim); len(r.Deadlocks) != 0 {
				t.Fatalf("deadlocks %v: busy while %s delayed the unknown attempt's undo", r.Deadlocks, f.Kind)
			}
		}
	})
	t.Run("a frozen waiter's grant", func(t *testing.T) {
		// c waited from 2700 to 3200, frozen from 2750 to 3150: a release
		// may have granted it the lock, which it gives back once it runs
		// again (by 3250 + Undo). b's busy at 3300 is honest; without the
		// freeze it is a deadlock (the control).
		waiter := Event{Ev: "call", Worker: "c", Key: "k", Op: "lock", Start: ms(2700), End: ms(3200), Budget: int64(time.Second), Res: ResBusy}
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), waiter, busy("b", 3300, 3301)}
		pause := []Fault{{Kind: FaultPause, Target: "c", Start: ms(2750), End: ms(3150)}}
		if r := Check(ev, nil, pause, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v: busy while a frozen waiter may hold a grant", r.Deadlocks)
		}
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 2 {
			t.Fatalf("deadlocks %v: without the freeze both busy answers are deadlocks", r.Deadlocks)
		}
	})
	t.Run("Redlock renewal held in a hung node", func(t *testing.T) {
		// a's holder was killed at 100 with no Unlock; a node hung from 90 to
		// 1000 may run a renewal a sent into it when it resumes, and keep a's
		// hold to TTL after that: b's busy at 1300 is honest. Without the
		// hang it is a deadlock (the control).
		lim := lim
		lim.Redlock = true
		ev := []Event{acq("a", "a#1", 0, 1, 10), busy("b", 1300, 1301)}
		kill := Fault{Kind: FaultKill, Target: "a", Start: ms(100), End: ms(101)}
		hung := Fault{Kind: FaultNodeHang, Target: "n1", Start: ms(90), End: ms(1000)}
		if r := Check(ev, nil, []Fault{kill, hung}, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v: a renewal held in a hung node keeps the hold", r.Deadlocks)
		}
		if r := Check(ev, nil, []Fault{kill}, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: killed at 100, busy 1.2s later with no node hung", r.Deadlocks)
		}
		hung.End = ms(95) // over before the holder's end: its renewals ran by then
		if r := Check(ev, nil, []Fault{kill, hung}, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: a hang that ended before the holder died explains nothing", r.Deadlocks)
		}
	})
	t.Run("Redlock minority left by a release", func(t *testing.T) {
		// a's release ran while a node hung (to 1000): that node may keep a's
		// hold to TTL after it resumes, and with another node down busy is
		// honest until then; without the fault it is a deadlock.
		lim := lim
		lim.Redlock = true
		unlock := Event{Ev: "call", Worker: "a", Key: "k", Holder: "a#1", Op: "unlock", Start: ms(100), End: ms(150), Res: ResOK}
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), unlock, busy("b", 1500, 1501)}
		hung := []Fault{{Kind: FaultNodeHang, Target: "n1", Start: ms(90), End: ms(1000)}}
		if r := Check(ev, nil, hung, lim); len(r.Deadlocks) != 0 {
			t.Fatalf("deadlocks %v: a node hung through the release keeps the hold", r.Deadlocks)
		}
		if r := Check(ev, nil, nil, lim); len(r.Deadlocks) != 1 {
			t.Fatalf("deadlocks %v: released on every node, busy 1.35s later", r.Deadlocks)
		}
		// Another call's partial grants, in flight while a node was faulted.
		other := Event{Ev: "call", Worker: "c", Key: "k", Holder: "c#1", Op: "lock", Start: ms(1200), End: ms(1300), Budget: int64(time.Second), Res: ResBusy}
		cut := []Fault{{Kind: FaultNodeNet, Target: "n2", Start: ms(1250), End: ms(1260)}}
		ev = []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 100), other, busy("b", 1500, 1501)}
		// b's busy is explained by c's partial grants; c's own is not.
		if r := Check(ev, nil, cut, lim); len(r.Deadlocks) != 1 || !strings.HasPrefix(r.Deadlocks[0], "c ") {
			t.Fatalf("deadlocks %v: want c's alone", r.Deadlocks)
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
	t.Run("past budget, the process unscheduled", func(t *testing.T) {
		// A 1s budget, 1.35s taken: past budget plus the 300ms bound,
		// unless 100ms of it the worker's process did not run.
		slow := busy("c/g1", 0, 1350)
		stall := Event{Ev: "stall", Worker: "c", Start: ms(500), End: ms(600)}
		if r := Check([]Event{slow, stall}, nil, nil, lim); len(r.Overlong) != 0 || r.Unscheduled != 1 {
			t.Fatalf("past budget %v, unscheduled %d: the stall's 100ms do not count", r.Overlong, r.Unscheduled)
		}
		other := stall
		other.Worker = "d"
		if r := Check([]Event{slow, other}, nil, nil, lim); len(r.Overlong) != 1 {
			t.Fatalf("control: another process's stall: past budget %v, want the call", r.Overlong)
		}
		if r := Check([]Event{slow}, nil, nil, lim); len(r.Overlong) != 1 {
			t.Fatalf("control: no stall: past budget %v, want the call", r.Overlong)
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
		// A release that reached Redis a TTL (500ms) after the hold was
		// last renewed may find it expired: a process that did not run in
		// time to renew it. Controls: a renewal, or an Extend, 100ms
		// before it makes "not held" a lie again.
		late := unlock
		late.Start, late.End = ms(600), ms(601)
		ev = []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 600), late}
		if r := Check(ev, nil, nil, lim); len(r.UnlockLies) != 0 {
			t.Fatalf("unlock lies %v: released a TTL after it was acquired, never renewed", r.UnlockLies)
		}
		renewal := Event{Ev: "renewed", Worker: "a", Key: "k", Fence: 10, Start: ms(500)}
		if r := Check(append(ev, renewal), nil, nil, lim); len(r.UnlockLies) != 1 {
			t.Fatalf("control: unlock lies %v, renewed 100ms before the release", r.UnlockLies)
		}
		other := renewal
		other.Fence = 11
		if r := Check(append(ev, other), nil, nil, lim); len(r.UnlockLies) != 0 {
			t.Fatalf("unlock lies %v: the renewal was another hold's", r.UnlockLies)
		}
		extend := Event{Ev: "call", Worker: "a", Key: "k", Holder: "a#1", Op: "extend", Start: ms(499), End: ms(500), Res: ResOK}
		if r := Check(append(ev, extend), nil, nil, lim); len(r.UnlockLies) != 1 {
			t.Fatalf("control: unlock lies %v, extended 100ms before the release", r.UnlockLies)
		}
	})
	t.Run("Redlock copies lost", func(t *testing.T) {
		// a's Unlock says not held (its renewals found too few copies):
		// honest when two masters were faulted in its time, not with one.
		lim := lim
		lim.Redlock = true
		unlock := Event{Ev: "call", Worker: "a", Key: "k", Holder: "a#1", Op: "unlock", Start: ms(400), End: ms(401), Res: ResNotHeld}
		ev := []Event{acq("a", "a#1", 0, 1, 10), end("a", "a#1", 400), unlock}
		one := []Fault{{Kind: FaultNodeRestart, Target: "n1", Start: ms(100), End: ms(300)}}
		two := append(one, Fault{Kind: FaultNodeHang, Target: "n2", Start: ms(200), End: ms(350)})
		if r := Check(ev, nil, one, lim); len(r.UnlockLies) != 1 {
			t.Fatalf("unlock lies %v: one master faulted, the other two held it", r.UnlockLies)
		}
		if r := Check(ev, nil, two, lim); len(r.UnlockLies) != 0 {
			t.Fatalf("unlock lies %v: two masters faulted in its time", r.UnlockLies)
		}
	})
	t.Run("write after loss", func(t *testing.T) {
		ev := []Event{{Ev: "write", Worker: "a", Key: "k", Holder: "a#1", Start: ms(5), End: ms(6), Live: false}}
		if r := Check(ev, nil, nil, lim); len(r.WriteAfter) != 1 {
			t.Fatalf("writes after loss %v", r.WriteAfter)
		}
	})
}

// The multi rules on made-up histories: a multi request m takes k1 and k2
// (a part of each in the checker's eyes) and writes k1, then k2.
func TestCheckMulti(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := Limits{TTL: 500 * time.Millisecond, Margin: 250 * time.Millisecond, Undo: 100 * time.Millisecond, Bound: 300 * time.Millisecond}
	multi := func(start, end int, res, why string) Event {
		return Event{Ev: "call", Worker: "m", Key: "k1,k2", Holder: "m#1", Op: OpMulti, Start: ms(start), End: ms(end), Budget: int64(time.Second), Res: res, Why: why, Fence: 20}
	}
	ends := func(at int) []Event {
		return []Event{{Ev: "end", Worker: "m", Key: "k1", Holder: "m#1@k1", End: ms(at), Why: "unlock"}, {Ev: "end", Worker: "m", Key: "k2", Holder: "m#1@k2", End: ms(at), Why: "unlock"},
			{Ev: "call", Worker: "m", Key: "k1,k2", Holder: "m#1", Op: "unlock", Start: ms(at), End: ms(at + 1), Res: ResOK}}
	}
	single := func(w, h, key string, start, acq, end int, fence int64) []Event {
		return []Event{{Ev: "call", Worker: w, Key: key, Holder: h, Op: "lock", Start: ms(start), End: ms(acq), Budget: int64(time.Second), Res: ResAcquired, Fence: fence},
			{Ev: "end", Worker: w, Key: key, Holder: h, End: ms(end), Why: "unlock"}}
	}
	write := func(seq int64, h, key string, at int, fence int64) Write {
		return Write{Seq: seq, At: ms(at), Key: key, Holder: h, Fence: fence, Live: true, Accepted: true}
	}
	// y held k2 from 0 and wrote it at 70, after m (which says it holds k2
	// since 50) wrote k1 at 60; m writes k2 only at 90, after y's end at 80.
	// No key's own history shows it: y's writes precede m's on k2, with a
	// lower fence, and y ended before m's first write to k2.
	ev := append(append(single("y", "y#1", "k2", 0, 1, 80, 10), multi(40, 50, ResAcquired, "")), ends(100)...)
	wr := []Write{write(1, "y#1", "k2", 5, 10), write(2, "m#1@k1", "k1", 60, 20), write(3, "y#1", "k2", 70, 10), write(4, "m#1@k2", "k2", 90, 20)}
	t.Run("split", func(t *testing.T) {
		r := Check(ev, wr, nil, lim)
		if len(r.MultiSplit) != 1 || r.Violations() != 1 || r.MultiCalls != 1 || r.MultiJudged != 1 || r.MultiCovered != 1 {
			t.Fatalf("split %v, violations %d, multi %d judged %d covered %d", r.MultiSplit, r.Violations(), r.MultiCalls, r.MultiJudged, r.MultiCovered)
		}
	})
	t.Run("frozen holder explains it", func(t *testing.T) {
		r := Check(ev, wr, []Fault{{Kind: FaultPause, Target: "y", Start: ms(20), End: ms(65)}}, lim)
		if len(r.MultiSplit) != 0 || r.FrozenOverlaps != 1 {
			t.Fatalf("split %v, frozen %d", r.MultiSplit, r.FrozenOverlaps)
		}
	})
	t.Run("clean", func(t *testing.T) {
		ev := append(append(single("y", "y#1", "k2", 0, 1, 30, 10), multi(40, 50, ResAcquired, "")), ends(100)...)
		wr := []Write{write(1, "y#1", "k2", 5, 10), write(2, "m#1@k1", "k1", 60, 20), write(3, "m#1@k2", "k2", 90, 20)}
		if r := Check(ev, wr, nil, lim); r.Violations() != 0 || len(r.Deadlocks) != 0 {
			t.Fatalf("violations %d: %v %v; deadlocks %v", r.Violations(), r.MultiSplit, r.Dishonest, r.Deadlocks)
		}
	})
	t.Run("later holder while the multi believed", func(t *testing.T) {
		ev := append(append([]Event{multi(0, 10, ResAcquired, "")}, ends(100)...), single("y", "y#1", "k2", 20, 30, 40, 30)...)
		wr := []Write{write(1, "m#1@k1", "k1", 15, 20), write(2, "y#1", "k2", 35, 30)}
		if r := Check(ev, wr, nil, lim); len(r.Dishonest) != 1 || len(r.MultiSplit) != 0 {
			t.Fatalf("dishonest %v, split %v", r.Dishonest, r.MultiSplit)
		}
	})
	// All or none: a multi request busy on k2 gave k1 back before it
	// returned, so k1 busy long after is a deadlock; just after (within the
	// undo), or after a fault in the call (the give-back may have failed:
	// TTL), it is not.
	busy := func(at int) Event {
		return Event{Ev: "call", Worker: "z", Key: "k1", Op: "trylock", Start: ms(at), End: ms(at + 1), Budget: int64(time.Second), Res: ResBusy}
	}
	failed := multi(0, 100, ResBusy, "k2")
	onK1 := func(r *Report) (n int) {
		for _, d := range r.Deadlocks {
			if strings.Contains(d, " k1 ") {
				n++
			}
		}
		return n
	}
	t.Run("given back", func(t *testing.T) {
		if r := Check([]Event{failed, busy(600)}, nil, nil, lim); onK1(r) != 1 {
			t.Fatalf("deadlocks %v: k1 busy 500ms after the multi request returned", r.Deadlocks)
		}
		if r := Check([]Event{failed, busy(300)}, nil, nil, lim); onK1(r) != 0 {
			t.Fatalf("deadlocks %v within the undo and margin", r.Deadlocks)
		}
		if r := Check([]Event{failed, busy(600)}, nil, []Fault{{Kind: FaultCut, Start: ms(50), End: ms(60)}}, lim); onK1(r) != 0 {
			t.Fatalf("deadlocks %v: a fault in the call, the give-back may have failed", r.Deadlocks)
		}
		if r := Check([]Event{failed}, nil, nil, lim); len(r.Deadlocks) != 1 || onK1(r) != 0 {
			t.Fatalf("deadlocks %v: the multi's own busy answer on k2, which no one held", r.Deadlocks)
		}
	})
}

// The liveness rules on made-up histories: each flags the case it names and
// lets the explained one pass.
func TestLivenessRules(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	lim := DefaultLimits(500 * time.Millisecond)
	lock := func(w, h string, start, end int, res string) Event {
		return Event{Ev: "call", Worker: w, Key: "k", Holder: h, Op: "lock", Start: ms(start), End: ms(end), Budget: int64(5 * time.Second), TTL: int64(500 * time.Millisecond), Res: res, Fence: int64(start + 1)}
	}
	queued := func(w, h string, at int) Event {
		return Event{Ev: "queued", Worker: w, Key: "k", Holder: h, Start: ms(at)}
	}
	end := func(w, h string, at int) Event {
		return Event{Ev: "end", Worker: w, Key: "k", Holder: h, End: ms(at), Why: "unlock"}
	}
	unlock := func(w, h string, start, stop int) Event {
		return Event{Ev: "call", Worker: w, Key: "k", Holder: h, Op: "unlock", Start: ms(start), End: ms(stop), Budget: int64(time.Second), Res: ResOK}
	}
	// a holds 0–100; b queues at 10 and gets the lock when a releases.
	handoff := func(bAcq int) []Event {
		return []Event{lock("a", "a#1", 0, 1, ResAcquired), queued("b", "b#1", 10), end("a", "a#1", 100), unlock("a", "a#1", 100, 101),
			lock("b", "b#1", 9, bAcq, ResAcquired), end("b", "b#1", bAcq+10), unlock("b", "b#1", bAcq+10, bAcq+11)}
	}
	t.Run("prompt handoff", func(t *testing.T) {
		r := Check(handoff(102), nil, nil, lim)
		if len(r.Stalls) != 0 || len(r.FIFOBreaks) != 0 || r.CheckedWaits != 1 || len(r.Handoffs) != 1 {
			t.Fatalf("stalls %v, FIFO %v, judged %d, handoffs %v", r.Stalls, r.FIFOBreaks, r.CheckedWaits, r.Handoffs)
		}
	})
	t.Run("stall", func(t *testing.T) {
		if r := Check(handoff(400), nil, nil, lim); len(r.Stalls) != 1 {
			t.Fatalf("stalls %v: the lock sat free 299ms while b waited", r.Stalls)
		}
	})
	t.Run("stall explained", func(t *testing.T) {
		for name, f := range map[string]Fault{
			"Redis hung":      {Kind: FaultHangShort, Start: ms(90), End: ms(350)},
			"b frozen":        {Kind: FaultPause, Target: "b", Start: ms(90), End: ms(350)},
			"b's path slow":   {Kind: FaultWorkerLatency, Target: "b", Start: ms(50), End: ms(350), D: int64(200 * time.Millisecond)},
			"all paths slow":  {Kind: FaultLatency, Start: ms(50), End: ms(350), D: int64(80 * time.Millisecond)},
			"cut connections": {Kind: FaultCut, Start: ms(100), End: ms(101)},
		} {
			if r := Check(handoff(400), nil, []Fault{f}, lim); len(r.Stalls) != 0 {
				t.Errorf("%s: stalls %v", name, r.Stalls)
			}
		}
		// A latency aimed at the process before b in b's worker slot (it
		// was restarted as b.2) slows b.2 too: the proxies are the slot's.
		restarted := handoff(400)
		for i := range restarted {
			if restarted[i].Worker == "b" {
				restarted[i].Worker = "b.2"
			}
		}
		inherited := Fault{Kind: FaultWorkerLatency, Target: "b.1", Start: ms(50), End: ms(350), D: int64(200 * time.Millisecond)}
		if r := Check(restarted, nil, []Fault{inherited}, lim); len(r.Stalls) != 0 {
			t.Errorf("stalls %v: b.2's path slowed by the fault aimed at b.1", r.Stalls)
		}
		inherited.Target = "c.1"
		if r := Check(restarted, nil, []Fault{inherited}, lim); len(r.Stalls) != 1 {
			t.Errorf("stalls %v: another slot's latency explains nothing", r.Stalls)
		}
		// Another waiter's slow path explains a handover slower by its latency, not more.
		slow := Fault{Kind: FaultWorkerLatency, Target: "c", Start: ms(0), End: ms(500), D: int64(50 * time.Millisecond)}
		ev := append(handoff(400), queued("c", "c#1", 5), lock("c", "c#1", 4, 420, ResBusy))
		if r := Check(ev, nil, []Fault{slow}, lim); len(r.Stalls) != 1 {
			t.Errorf("stalls %v: a 299ms gap, where a 50ms-slow waiter explains 250ms", r.Stalls)
		}
		// Command latency on b's own path (its Pub/Sub untouched) explains
		// a claim three of its replies late, not a wait out of it: the
		// 299ms gap is within 150ms + 3 x 60ms, not within 150ms + 3 x 40ms.
		cmd := Fault{Kind: FaultCommandLatency, Target: "b", Start: ms(50), End: ms(350), D: int64(60 * time.Millisecond)}
		if r := Check(handoff(400), nil, []Fault{cmd}, lim); len(r.Stalls) != 0 {
			t.Errorf("stalls %v: b's command replies 60ms late", r.Stalls)
		}
		cmd.D = int64(40 * time.Millisecond)
		if r := Check(handoff(400), nil, []Fault{cmd}, lim); len(r.Stalls) != 1 {
			t.Errorf("stalls %v: b's command replies 40ms late explain 270ms, not 299ms", r.Stalls)
		}
		// A waiter that died in the queue may hold a grant until its entry expires.
		died := []Event{{Ev: "begin", Worker: "d", Key: "k", Holder: "d#1", Op: "lock", Start: ms(2), TTL: int64(500 * time.Millisecond)}, queued("d", "d#1", 3)}
		if r := Check(append(handoff(400), died...), nil, []Fault{{Kind: FaultKill, Target: "d", Start: ms(50), End: ms(51)}}, lim); len(r.Stalls) != 0 {
			t.Errorf("stalls %v: a dead waiter ahead", r.Stalls)
		}
	})
	t.Run("FIFO break", func(t *testing.T) {
		// c begins at 50, after b queued, and gets the lock at 102 while b waits on.
		ev := []Event{lock("a", "a#1", 0, 1, ResAcquired), queued("b", "b#1", 10), end("a", "a#1", 100), unlock("a", "a#1", 100, 101),
			lock("c", "c#1", 50, 102, ResAcquired), end("c", "c#1", 110), unlock("c", "c#1", 110, 111),
			lock("b", "b#1", 9, 113, ResAcquired)}
		r := Check(ev, nil, nil, lim)
		if len(r.FIFOBreaks) != 1 || r.CheckedPairs != 1 {
			t.Fatalf("FIFO breaks %v (judged %d): c overtook b", r.FIFOBreaks, r.CheckedPairs)
		}
		if r := Check(ev, nil, []Fault{{Kind: FaultRestart, Start: ms(60), End: ms(70)}}, lim); len(r.FIFOBreaks) != 0 {
			t.Fatalf("FIFO breaks %v across a restart (the queue was lost)", r.FIFOBreaks)
		}
		lim := lim
		lim.Redlock = true
		if r := Check(ev, nil, nil, lim); len(r.FIFOBreaks) != 0 {
			t.Fatalf("FIFO breaks %v on Redlock, which promises no order", r.FIFOBreaks)
		}
	})
	t.Run("dishonest unavailable", func(t *testing.T) {
		un := func(why string) Event {
			e := lock("b", "b#1", 1200, 1300, ResUnavailable)
			e.Why = why
			return e
		}
		// b's process started at 0: past its cold start (Settle) at 1200.
		start := Event{Ev: "begin", Worker: "b", Key: "k", Holder: "b#0", Op: "lock", Start: ms(1)}
		if r := Check([]Event{{Ev: "begin", Worker: "b", Key: "k", Holder: "b#0", Op: "lock", Start: ms(1000)}, un("lockgate: redis unavailable: acquire: EOF")}, nil, nil, lim); len(r.DishonestUnavailable) != 0 {
			t.Fatalf("dishonest unavailable %v in a cold start", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: EOF")}, nil, nil, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("dishonest unavailable %v: no fault at all", r.DishonestUnavailable)
		}
		cut := []Fault{{Kind: FaultCut, Start: ms(1150), End: ms(1151)}}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: EOF")}, nil, cut, lim); len(r.DishonestUnavailable) != 0 {
			t.Fatalf("dishonest unavailable %v after a cut", r.DishonestUnavailable)
		}
		slow := []Fault{{Kind: FaultWorkerLatency, Target: "b", Start: ms(1150), End: ms(1400), D: int64(100 * time.Millisecond)}}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: no answer within the wait budget")}, nil, slow, lim); len(r.DishonestUnavailable) != 0 {
			t.Fatalf("dishonest unavailable %v: a slow path runs out of time", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: EOF")}, nil, slow, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("dishonest unavailable %v: a slow path still answers", r.DishonestUnavailable)
		}
		stall := Event{Ev: "stall", Worker: "b", Start: ms(1220), End: ms(1280)}
		budget := un("lockgate: redis unavailable: acquire: no answer within the call's budget")
		if r := Check([]Event{start, stall, budget}, nil, nil, lim); len(r.DishonestUnavailable) != 0 {
			t.Fatalf("dishonest unavailable %v: the worker's process did not run for a stretch of the call", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, budget}, nil, nil, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("control: dishonest unavailable %v: the time ran out with no fault and no stall", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, stall, un("lockgate: redis unavailable: acquire: EOF")}, nil, nil, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("control: dishonest unavailable %v: a stall explains only running out of time", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: this acquisition already ended")}, nil, cut, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("dishonest unavailable %v: no fault explains an owner given up while waiting", r.DishonestUnavailable)
		}
		lim := lim
		lim.Redlock = true
		one := []Fault{{Kind: FaultNodeHang, Target: "n1", Start: ms(1150), End: ms(1400)}}
		two := append(one, Fault{Kind: FaultNodeHang, Target: "n2", Start: ms(1150), End: ms(1400)})
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: too few")}, nil, one, lim); len(r.DishonestUnavailable) != 1 {
			t.Fatalf("dishonest unavailable %v: Redlock with one master down has a majority", r.DishonestUnavailable)
		}
		if r := Check([]Event{start, un("lockgate: redis unavailable: acquire: too few")}, nil, two, lim); len(r.DishonestUnavailable) != 0 {
			t.Fatalf("dishonest unavailable %v: two of three masters down", r.DishonestUnavailable)
		}
	})
}
