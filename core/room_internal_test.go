package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// A grant that arrives after the last waiter of a lock left the room and
// before the next one joins reaches that one: the room keeps the lock's
// entry, and the grants it hears, until the shard has unsubscribed. Each
// round: B waits (subscribed, confirmed), leaves; A's grant arrives; A
// joins. A must hear of it, by the grant kept for it, or, when the shard
// unsubscribed in between, by the check after it subscribed again (Redis
// says A holds the lock). Control: with the room forgetting the lock at
// once (forget-left), the grant is dropped, and when the shard had not
// unsubscribed yet nothing is confirmed again, so nothing tells A: some
// round stalls. (The rig's drop-early workload met it as a 3s stall once
// in some runs.)
func TestGrantWhileLastWaiterLeaves(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	const rounds = 10
	ctx := context.Background()
	stalls := func(name string, mut mutants) int {
		r := testRoom(t, client, mut)
		n := 0
		for i := range rounds {
			ch := fmt.Sprintf("lockgate:{%s-%d}", name, i)
			b := joinHolder(t, r, client, ch, "B") // B holds the lock at first
			// B's release hands the lock to A.
			if err := client.HSet(ctx, ch, "owner", "A").Err(); err != nil {
				t.Fatal(err)
			}
			r.leave(b)
			r.deliver(ch, "g A 7 1 1000")
			a := newWaiter(ch, "A")
			if !r.add(a, r.clock()) {
				t.Fatal("room closed")
			}
			select {
			case <-a.granted:
			case <-a.wake:
			case <-time.After(time.Second):
				n++
			}
			r.leave(a)
		}
		return n
	}
	if n := stalls("fixed", mutants{}); n > 0 {
		t.Errorf("%d of %d waiters never heard of their grant", n, rounds)
	}
	if n := stalls("control", mutants{forgetLeft: true}); n == 0 {
		t.Errorf("control: with the lock forgotten at its last waiter's leaving, all %d waiters still heard of their grant", rounds)
	} else {
		t.Logf("control: %d of %d waiters stalled", n, rounds)
	}
}

// A "free" message that arrives while a waiter's attempt, answered busy
// before the release, is on its way back wakes that waiter when it joins:
// a Redlock waiter does not queue, so nothing else would tell it before its
// fallback timer, the holder's TTL (a LockMulti over Redlock once ended
// busy after a 10s wait so: the lock's last waiter had just left, and the
// shard had not unsubscribed yet). Each round: C waits (subscribed,
// confirmed) and stays, as that subscription does; A's attempt is sent;
// the lock is freed ("f", no owner in Redis), which wakes C; A joins and
// must be woken. Control: with the message not noted (forget-free), A is
// not: every round stalls.
func TestFreeBeforeWaiterJoins(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	const rounds = 5
	ctx := context.Background()
	stalls := func(name string, mut mutants) int {
		r := testRoom(t, client, mut)
		n := 0
		for i := range rounds {
			ch := fmt.Sprintf("lockgate:{%s-%d}", name, i)
			c := joinHolder(t, r, client, ch, "C") // C holds the lock at first
			sent := r.clock()                      // A's attempt, answered busy
			if err := client.Del(ctx, ch).Err(); err != nil {
				t.Fatal(err)
			}
			r.deliver(ch, "f")
			select {
			case <-c.wake:
			default:
				t.Fatal("the free message did not wake the waiter in the room")
			}
			a := newWaiter(ch, "A")
			if !r.add(a, sent) {
				t.Fatal("room closed")
			}
			select {
			case <-a.wake:
			case <-time.After(time.Second):
				n++
			}
			r.leave(a)
			r.leave(c)
		}
		return n
	}
	if n := stalls("fixed", mutants{}); n > 0 {
		t.Errorf("%d of %d waiters were not woken by the lock freed before they joined", n, rounds)
	}
	if n := stalls("control", mutants{forgetFree: true}); n != rounds {
		t.Errorf("control: with the free message not noted, %d of %d waiters stalled, want all", n, rounds)
	}
}

// A room closed while a waiter is still in it (Close racing a Lock that
// waits, which leaves the room only after) stops its shard at once: the
// shard no longer subscribes again and again, a new connection a turn,
// until the waiter leaves. (Before, with a waiter that never left, close
// waited forever while the shard spun: a test timed out after 10 minutes.)
func TestCloseWithWaiterInRoom(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	r := testRoom(t, client, mutants{})
	w := joinHolder(t, r, client, "lockgate:{close}", "A") // the shard is serving
	closed := make(chan struct{})
	go func() {
		r.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return within 5s with a waiter in the room")
	}
	r.leave(w)
}

// A server that refuses CLIENT INFO to the Locker's user (an ACL without
// +client|info) turns following the master off for the room, after one
// refusal: it is not asked every second, to be refused every second.
// Control: the same server, the command allowed, answers its address.
func TestMasterAddrRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	room := func() *waitRoom {
		r := testRoom(t, client, mutants{})
		r.failover = true // as for a Sentinel failover client
		return r
	}
	if r := room(); r.masterAddr() != srv.Addr || r.noClientInfo.Load() {
		t.Fatalf("control: CLIENT INFO allowed, masterAddr = %q (noClientInfo %v), want %s", r.masterAddr(), r.noClientInfo.Load(), srv.Addr)
	}
	if err := client.Do(context.Background(), "ACL", "SETUSER", "default", "-client|info").Err(); err != nil {
		t.Fatal(err)
	}
	r := room()
	if got := r.masterAddr(); got != "" || !r.noClientInfo.Load() {
		t.Fatalf("CLIENT INFO refused: masterAddr = %q, noClientInfo %v; want \"\", true", got, r.noClientInfo.Load())
	}
}

// testRoom is a wait room on client with mut, closed at the end of the
// test, on a clock from its making.
func testRoom(t *testing.T, client redis.UniversalClient, mut mutants) *waitRoom {
	epoch := time.Now()
	r := newWaitRoom(client, func() int64 { return int64(time.Since(epoch)) }, &mut)
	t.Cleanup(r.close)
	return r
}

// joinHolder makes owner the holder of ch in Redis and adds its waiter to
// r, returning once the subscription is confirmed and checked (the check
// wakes the waiter that holds the lock).
func joinHolder(t *testing.T, r *waitRoom, client redis.UniversalClient, ch, owner string) *waiter {
	t.Helper()
	if err := client.HSet(context.Background(), ch, "owner", owner).Err(); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(ch, owner)
	if !r.add(w, r.clock()) {
		t.Fatal("room closed")
	}
	select {
	case <-w.wake:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription was not confirmed and checked in 5s")
	}
	return w
}

// A waiter that joins the room after a grant to another waiter it could
// not have heard of is told of that handover, on one server and on a
// Cluster: then, if the new holder is gone, it tries when that holder's
// first expiry passes, not at its own next refresh (its attempt's reply
// still names the earlier holder and its TTL). Two ways in:
//   - its attempt's reply came after the grant, on a subscription already
//     confirmed for a waiter before it (the room keeps the lock's latest
//     handover);
//   - its own subscription came after the grant (the check after the
//     confirmation reads the holder's TTL, and nudges it).
//
// Control: with late joiners told nothing (late-join-blind), neither hears.
func TestLateJoinerHearsOfHandover(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{{"single", srv.Client(t)}, {"cluster", cl.Client(t)}} {
		t.Run(c.name, func(t *testing.T) {
			for _, blind := range []bool{false, true} {
				mut := mutants{lateJoinBlind: blind}
				r := testRoom(t, c.client, mut)
				replyLate := lateReplyHears(t, r, c.client, fmt.Sprintf("lockgate:{reply-%v}", blind))
				subLate := lateSubscriptionHears(t, r, c.client, fmt.Sprintf("lockgate:{sub-%v}", blind), blind)
				if blind {
					if replyLate || subLate {
						t.Errorf("control: late joiners told nothing, yet the late reply's waiter heard %v, the late subscriber %v", replyLate, subLate)
					}
					continue
				}
				if !replyLate {
					t.Error("a waiter whose attempt's reply came after a grant to another was not told of it")
				}
				if !subLate {
					t.Error("a waiter subscribed after a grant to another was not told of the new holder's TTL")
				}
			}
		})
	}
}

// lateReplyHears: C waits (subscribed, confirmed); A's attempt is sent;
// the lock is granted to X (no waiter of this room); A joins. Reports
// whether A finds X's handover.
func lateReplyHears(t *testing.T, r *waitRoom, client redis.UniversalClient, ch string) bool {
	t.Helper()
	c := joinHolder(t, r, client, ch, "C")
	defer r.leave(c)
	sent := r.clock() // A's attempt, answered busy before the grant
	r.deliver(ch, "g X 7 1 450")
	a := newWaiter(ch, "A")
	if !r.add(a, sent) {
		t.Fatal("room closed")
	}
	defer r.leave(a)
	h, ok := lastHandover(a)
	if ok && (h.to != "X" || h.life != 450*time.Millisecond) {
		t.Fatalf("handover %+v, want X's, 450ms", h)
	}
	return ok
}

// lateSubscriptionHears: X, a waiter of another Locker, was granted the
// lock (for 30s); A is the first waiter of this room, so it subscribes only
// now. Reports whether A is nudged with X's handover: within 5s, or 2s
// for a room of the control (blind).
func lateSubscriptionHears(t *testing.T, r *waitRoom, client redis.UniversalClient, ch string, blind bool) bool {
	t.Helper()
	ctx := context.Background()
	if err := client.HSet(ctx, ch, "owner", "X").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.PExpire(ctx, ch, 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	a := newWaiter(ch, "A")
	if !r.add(a, r.clock()) {
		t.Fatal("room closed")
	}
	defer r.leave(a)
	wait := time.After(5 * time.Second)
	if blind {
		// Nothing will come: the subscription and its check take a few
		// ms; 2s is the control's margin for a loaded machine.
		wait = time.After(2 * time.Second)
	}
	select {
	case <-a.nudge:
	case <-a.wake:
		t.Fatal("the check woke A, which does not hold the lock")
	case <-wait:
		return false
	}
	h, ok := lastHandover(a)
	if !ok || h.to != "X" || !h.found || h.life <= 0 || h.life > 30*time.Second {
		t.Fatalf("nudged with handover %+v (%v), want X's as found, within 30s", h, ok)
	}
	return true
}

// lastHandover reads the handovers the rooms left for w since it last
// read them, as the waiting Lock does, and returns the last one.
func lastHandover(w *waiter) (h handover, ok bool) {
	w.readHandovers(func(got handover) { h, ok = got, true })
	return h, ok
}

// BenchmarkGrantWithWaiters is what the room does for one grant message
// (parse it, pass it to its waiter, keep it as the lock's latest handover,
// nudge the waiters that sleep past its first expiry: none here) while 10,
// 1 000 or 10 000 callers of the Locker wait for the same lock. It grows
// with the waiters, by about a nanosecond each (a scan of a slice): a hot
// lock's every handover pays it.
func BenchmarkGrantWithWaiters(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			r := &waitRoom{clock: func() int64 { return 1 }, mut: &mutants{}, chans: map[string]*lockWaiters{}}
			lw := &lockWaiters{at: map[string]int{}}
			r.chans["ch"] = lw
			for i := range n {
				w := newWaiter("ch", fmt.Sprint("w", i))
				w.until.Store(0) // wakes before any expiry: no nudge
				lw.add(w)
			}
			b.ReportAllocs()
			for b.Loop() {
				r.deliver("ch", "g w0 7 1 1000")
			}
		})
	}
}

// The lock's waiters, kept in a slice for the grant's scan, stay found by
// owner through any order of joins and leaves: removing one moves the last
// into its place, whose index must follow. 2 000 random joins and leaves
// (a fixed seed), every present waiter looked up after each, every one
// that left not found, and a leave of a waiter not (or no longer) there
// refused. (Checked against a remove that forgets to move the last
// waiter's index: a later lookup or removal then goes out of range.)
func TestLockWaitersChurn(t *testing.T) {
	lw := &lockWaiters{at: map[string]int{}}
	in := map[string]*waiter{}
	var gone []*waiter
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		if len(in) == 0 || rng.IntN(3) > 0 {
			w := newWaiter("ch", fmt.Sprint("w", i))
			lw.add(w)
			in[w.owner] = w
		} else {
			var w *waiter
			for _, w = range in {
				break
			}
			if !lw.remove(w) {
				t.Fatalf("op %d: %s was not removed", i, w.owner)
			}
			delete(in, w.owner)
			gone = append(gone, w)
		}
		if len(lw.waiters) != len(in) || len(lw.at) != len(in) {
			t.Fatalf("op %d: %d waiters, %d indexed, want %d", i, len(lw.waiters), len(lw.at), len(in))
		}
		for o, w := range in {
			if got := lw.waiter(o); got != w {
				t.Fatalf("op %d: waiter(%s) = %p, want %p", i, o, got, w)
			}
		}
	}
	for _, w := range gone {
		if lw.waiter(w.owner) != nil || lw.remove(w) {
			t.Fatalf("%s left, yet is found or removed again", w.owner)
		}
	}
	if len(gone) == 0 {
		t.Fatal("no waiter left: the churn removed nothing")
	}
}
