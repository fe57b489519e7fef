package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// TestSemaphoreCountOfQueuedWaiters: the permits count is the holders'
// while any hold, else the live waiters': four waiters queue under
// permits=3, the three holders expire (nobody releases), and a new caller
// with permits=5 finds no live holder. It is refused (ErrInvalid naming
// the waiters' count) rather than handing permits to all four waiters
// under its own count (before: four callers that each asked for one of 3
// held valid leases at once). Control: the new caller passes permits=3
// too: it hands three permits to the first three waiters and is busy; the
// fourth waits.
func TestSemaphoreCountOfQueuedWaiters(t *testing.T) {
	t.Parallel()
	t.Run("control", func(t *testing.T) { permitsChange(t, 3) })
	t.Run("permits=5", func(t *testing.T) { permitsChange(t, 5) })
}

func permitsChange(t *testing.T, newCount int) {
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	p, waiter := proxiedLocker(t, srv)
	ctx := locktest.Context(t)
	const name = "review-count"
	for i := 0; i < 3; i++ {
		if _, err := holder.Semaphore(ctx, name, 3, core.WithTTL(400*time.Millisecond), core.WithoutWatchdog()); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	var holding atomic.Int32
	var maxHolding atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := waiter.Semaphore(ctx, name, 3, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			n := holding.Add(1)
			for {
				m := maxHolding.Load()
				if n <= m || maxHolding.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			if s.Context().Err() != nil {
				errs <- errors.New("lease lost while held")
			}
			s.Unlock(context.WithoutCancel(ctx))
		}()
		for j := 0; semQueueLen(direct, name) != int64(i+1); j++ {
			if j == 500 {
				t.Fatal("the waiter never queued")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.Stall() // the waiters' polls are held: the holders expire unseen
	for i := 0; semHolders(t, direct, name) != 0; i++ {
		if i == 200 {
			t.Fatal("the holders' permits never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s5, err := other.Semaphore(ctx, name, newCount, core.WithWait(core.NoWait))
	t.Logf("a caller with permits=%d while 4 waiters of permits=3 are queued: %v", newCount, err)
	if err == nil {
		defer s5.Unlock(ctx)
	}
	p.Unstall()
	deadline := time.Now().Add(5 * time.Second)
	for holding.Load() < 4 && time.Now().Before(deadline) { // (the control: until the deadline)
		time.Sleep(20 * time.Millisecond)
	}
	got := maxHolding.Load()
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Logf("waiter: %v", e)
	}
	if got > 3 {
		t.Fatalf("%d callers that each passed permits=3 held valid leases at once", got)
	}
}

// TestSemaphoreHandoverKeepsEarlierExpiry: a queued waiter of a semaphore
// sleeps until the earliest permit expiry it was told, and a grant to
// another waiter ("handed", that one's life) replaces it only when it is
// sooner: right for a lock (one holder), wrong for a semaphore, whose
// waiter otherwise missed an earlier-expiring permit of a dead holder and
// waited for its next refresh (a third of its TTL, 8.5s here) with a permit
// free and itself at the head. Setup: permits=2; A (dead, TTL 1.5s, no
// watchdog) and B hold; W1, W2 queue (TTL 30s, refresh 10s); B releases,
// handing its permit to W1; A expires at ~1.5s, and W2 gets its permit
// then. Control: B releases before W2 queues (W2 hears no handover).
func TestSemaphoreHandoverKeepsEarlierExpiry(t *testing.T) {
	t.Parallel()
	t.Run("control", func(t *testing.T) { handedExpiry(t, false) })
	t.Run("handed", func(t *testing.T) { handedExpiry(t, true) })
}

func handedExpiry(t *testing.T, handedWhileQueued bool) {
	srv := redistest.Start(t)
	dead, direct := locktest.NewLocker(t, srv)
	hl, _ := locktest.NewLocker(t, srv)
	w1l, _ := locktest.NewLocker(t, srv)
	w2l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	const name = "review-handed"
	aTTL := 1500 * time.Millisecond
	if _, err := dead.Semaphore(ctx, name, 2, core.WithTTL(aTTL), core.WithoutWatchdog()); err != nil {
		t.Fatal(err)
	}
	aExpires := time.Now().Add(aTTL)
	b, err := hl.Semaphore(ctx, name, 2)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		s   *core.Lease
		at  time.Time
		err error
	}
	r1, r2 := make(chan res, 1), make(chan res, 1)
	go func() {
		s, err := w1l.Semaphore(ctx, name, 2, core.WithWait(30*time.Second), core.WithTTL(30*time.Second))
		r1 <- res{s, time.Now(), err}
	}()
	for j := 0; semQueueLen(direct, name) != 1; j++ {
		if j == 500 {
			t.Fatal("W1 never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var g1 res
	if !handedWhileQueued {
		if err := b.Unlock(ctx); err != nil { // hands B's permit to W1
			t.Fatal(err)
		}
		if g1 = <-r1; g1.err != nil {
			t.Fatal(g1.err)
		}
	}
	go func() {
		s, err := w2l.Semaphore(ctx, name, 2, core.WithWait(30*time.Second), core.WithTTL(30*time.Second))
		r2 <- res{s, time.Now(), err}
	}()
	for j := 0; semQueueLen(direct, name) != int64(map[bool]int{true: 2, false: 1}[handedWhileQueued]); j++ {
		if j == 500 {
			t.Fatal("W2 never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if handedWhileQueued {
		if err := b.Unlock(ctx); err != nil { // hands B's permit to W1; W2 hears it
			t.Fatal(err)
		}
		if g1 = <-r1; g1.err != nil {
			t.Fatal(g1.err)
		}
	}
	defer g1.s.Unlock(ctx)
	if time.Now().After(aExpires) {
		t.Skip("setup too slow: A expired before B's release")
	}
	g2 := <-r2
	if g2.err != nil {
		t.Fatal(g2.err)
	}
	defer g2.s.Unlock(ctx)
	late := g2.at.Sub(aExpires)
	t.Logf("W2 got the permit %v after A's permit expired", late)
	if late > 2*time.Second {
		t.Fatalf("W2, head of the queue, got the free permit %v after it came free (A's expiry)", late)
	}
}

// A semaphore waiter whose turn comes takes its permit and hands the other
// free permits to the live waiters behind it, at once: here both holders'
// permits are gone from Redis (their hash lost), the first waiter finds two
// free at its refresh, and the second, whose own refresh is 10s away, gets
// the other in its 3s budget. Both wait on one Locker, so that no check
// after a new subscription wakes the second. Control: sem-stop-at-self
// leaves the second permit free until the second waiter wakes by itself
// (busy at its budget).
func TestSemaphoreWaiterPassesSparePermitsBehindIt(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "sem-stop-at-self", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		holders, direct := locktest.NewLocker(t, srv)
		waiters, _ := locktest.NewLocker(t, srv, opts...)
		first, second := waiters, waiters
		ctx := locktest.Context(t)
		const name = "spare"
		for range 2 {
			if _, err := holders.Semaphore(ctx, name, 2); err != nil {
				t.Fatal(err)
			}
		}
		hash := locktest.RedisKey(name) + ":sem"
		type result struct {
			s   *core.Lease
			err error
		}
		firstDone := make(chan result, 1)
		go func() {
			s, err := first.Semaphore(ctx, name, 2, core.WithTTL(600*time.Millisecond), core.WithWait(5*time.Second))
			firstDone <- result{s, err}
		}()
		waitQueuedOn(t, direct, hash, 1)
		secondDone := make(chan error, 1)
		go func() {
			s, err := second.Semaphore(ctx, name, 2, core.WithTTL(30*time.Second), core.WithWait(3*time.Second))
			if err == nil {
				defer s.Unlock(ctx)
			}
			secondDone <- err
		}()
		waitQueuedOn(t, direct, hash, 2)
		direct.Del(ctx, hash) // the holders' permits are lost; no release tells anyone
		r := <-firstDone
		if r.err != nil {
			t.Fatalf("the first waiter: %v", r.err)
		}
		defer r.s.Unlock(ctx) // held until the second waiter is done: its release would pass a permit on
		err := <-secondDone
		switch {
		case control && err == nil:
			t.Fatal("control: the second waiter got the spare permit")
		case !control && err != nil:
			t.Fatalf("the second waiter, behind one that took a permit with another free: %v", err)
		}
	})
}
