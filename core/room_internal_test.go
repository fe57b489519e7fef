package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
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
		epoch := time.Now()
		r := newWaitRoom(client, func() int64 { return int64(time.Since(epoch)) }, &mut)
		defer r.close()
		n := 0
		for i := range rounds {
			ch := fmt.Sprintf("lockgate:{%s-%d}", name, i)
			// B holds the lock at first: the check after the subscription
			// is confirmed wakes B, which tells that it is.
			if err := client.HSet(ctx, ch, "owner", "B").Err(); err != nil {
				t.Fatal(err)
			}
			b := newWaiter(ch, "B")
			if !r.add(b, r.clock()) {
				t.Fatal("room closed")
			}
			select {
			case <-b.wake:
			case <-time.After(5 * time.Second):
				t.Fatal("the subscription was not confirmed and checked in 5s")
			}
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
