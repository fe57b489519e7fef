package core_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The queue's bookkeeping holds for waiters of any mix of TTLs, for any
// number of dead entries, and while the lock passes quickly from waiter to
// waiter; each test runs its scenario with the defect it guards against
// put back (core.WithMutants) as its control.

// A waiter with a short TTL never shortens the life of a long waiter's
// place: a 60s waiter queues, a 60ms waiter of another Locker joins and
// gives up; 400ms later the holder releases while the 60s waiter's network
// is stalled, and a TryLock of a third Locker is answered busy (its attempt
// grants the lock to the live waiter), which then has it. Before, the
// queue's keys expired with the last joiner's TTL and the TryLock took the
// lock ahead of the 60s waiter, every run. Control: that put back.
func TestShortWaiterKeepsLongWaitersPlace(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "queue-expiry"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			srv := redistest.Start(t)
			holder, direct := locktest.NewLocker(t, srv, core.WithMutants(mutant))
			short, _ := locktest.NewLocker(t, srv, core.WithMutants(mutant))
			third, _ := locktest.NewLocker(t, srv, core.WithMutants(mutant))
			p := redistest.StartProxy(t, srv.Addr)
			c := redis.NewClient(&redis.Options{Addr: p.Addr})
			t.Cleanup(func() { c.Close() })
			long := locktest.Locker(t, c, core.WithMutants(mutant))
			locktest.Warm(t, long)
			// The short waiter's 30ms would not cover a Locker's first lock
			// (its server check and script load) beside other tests.
			locktest.Warm(t, short)
			ctx := locktest.Context(t)
			const key = "place"
			s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			longDone := make(chan error, 1)
			go func() {
				w, err := long.Lock(ctx, key, core.WithTTL(time.Minute), core.WithWait(20*time.Second))
				if err == nil {
					w.Unlock(ctx)
				}
				longDone <- err
			}()
			waitQueued(t, direct, key, 1)
			if _, err := short.Lock(ctx, key, core.WithTTL(60*time.Millisecond), core.WithWait(30*time.Millisecond)); !errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("the short waiter = %v, want busy", err)
			}
			time.Sleep(400 * time.Millisecond) // the fault: time, past the short waiter's entry
			p.Stall()
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			ts, err := third.TryLock(ctx, key)
			p.Unstall()
			if mutant != "" {
				if err != nil {
					t.Fatalf("control: with the queue's expiry from the last joiner, the TryLock = %v, want it to jump the queue", err)
				}
				ts.Unlock(ctx)
				<-longDone
				return
			}
			if !errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("TryLock of a third Locker with a live 60s waiter queued = %v, want busy", err)
			}
			if err := <-longDone; err != nil {
				t.Fatalf("the 60s waiter = %v, want the lock", err)
			}
		})
	}
}

// Waiters that died in the queue (their connections cut and refused while
// queued: their processes gone) never make a free lock busy, nor delay its
// grant to a live waiter behind them, however many: 80 of them, and 600ms
// later (past their TTL of 500ms) TryLock of the free lock gets it; with a
// live waiter queued behind them (its network stalled, so that it cannot
// take the lock itself), the TryLock is answered busy and its attempt hands
// the lock to that waiter. Before, one call dropped at most 64 dead entries
// and answered busy, and the queue outlived its entries. Controls: those
// put back (the bound alone, with a live waiter behind: not granted).
func TestDeadWaitersDoNotBlockAFreeLock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mutant string
		behind bool // a live waiter queued behind the dead ones
	}{{"", false}, {"queue-expiry,sweep-64", false}, {"", true}, {"sweep-64", true}} {
		t.Run(fmt.Sprintf("mutant=%s/behind=%v", c.mutant, c.behind), func(t *testing.T) {
			srv := redistest.Start(t)
			live, direct := locktest.NewLocker(t, srv, core.WithMutants(c.mutant))
			p := redistest.StartProxy(t, srv.Addr)
			pc := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
			t.Cleanup(func() { pc.Close() })
			dead := locktest.Locker(t, pc, core.WithMutants(c.mutant))
			locktest.Warm(t, dead)
			ctx := locktest.Context(t)
			const key, n = "graveyard", 80
			ttl := core.WithTTL(500 * time.Millisecond)
			if _, err := dead.Lock(ctx, key, ttl); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dead.Lock(ctx, key, ttl, core.WithWait(10*time.Second)) // fails once cut off
				}()
			}
			waitQueued(t, direct, key, n)
			var lp *redistest.Proxy
			var behind <-chan waitResult
			if c.behind {
				var waiter *core.Locker
				lp, waiter = proxiedLocker(t, srv)
				behind = waitFor(ctx, waiter, key, 10*time.Second)
				waitQueued(t, direct, key, n+1)
				lp.Stall()
				defer lp.Unstall()
			}
			p.SetRefuse(true) // the fault: they are gone (their calls retry, refused, until the Locker closes)
			defer wg.Wait()
			defer dead.Close()
			time.Sleep(600 * time.Millisecond) // past their TTL: nothing of theirs is live
			var last string
			if c.behind {
				q := direct.ZRange(ctx, "lockgate:{"+key+"}:q", 0, -1).Val()
				if len(q) != n+1 {
					t.Fatalf("probe: %d entries in the queue, want the %d dead and the live one", len(q), n)
				}
				last = q[n]
			}
			s, err := live.TryLock(ctx, key)
			if !c.behind {
				if c.mutant != "" {
					if err == nil {
						t.Fatal("control: with at most 64 dead entries dropped per call, TryLock still got the free lock")
					}
					return
				}
				if err != nil {
					t.Fatalf("TryLock of a free lock behind %d dead waiters = %v, want the lock", n, err)
				}
				s.Unlock(ctx)
				return
			}
			if !errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("TryLock with a live waiter queued = %v, want busy", err)
			}
			owner := ownerIn(ctx, direct, "lockgate:{"+key+"}")
			if c.mutant != "" {
				if owner == last {
					t.Fatal("control: with at most 64 dead entries dropped per call, the live waiter behind them was still granted the lock")
				}
				return
			}
			if owner != last {
				t.Fatalf("after the TryLock the lock's owner is %q, want the live waiter %q: the dead entries delayed its grant", owner, last)
			}
			lp.Unstall()
			checkWoken(t, behind, key)
		})
	}
}

// A waiter keeps its place while the lock passes quickly from waiter to
// waiter ahead of it: 40 waiters of another Locker ahead, each holding
// 10ms, hand the lock on every 10ms for 400ms, longer than the waiter's
// queue entry lives without a refresh (200ms at a TTL of 300ms); its
// refreshes keep their schedule, so it gets the lock before any of them
// gets it a second time (each queues again behind it). Before, every
// handover to another waiter put the waiter's next refresh a whole
// interval later: it never refreshed, its entry expired, and it was sent
// to the back (found by the fault rig). Control: that put back.
func TestWaiterKeepsItsPlaceThroughHandovers(t *testing.T) {
	t.Parallel()
	for _, mutant := range []string{"", "restart-refresh"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			srv := redistest.Start(t)
			holder, direct := locktest.NewLocker(t, srv)
			crowd, _ := locktest.NewLocker(t, srv)
			l, _ := locktest.NewLocker(t, srv, core.WithMutants(mutant))
			ctx := locktest.Context(t)
			const key, ahead = "handovers", 40
			s, err := holder.Lock(ctx, key, core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var order []string
			take := func(name string, lk *core.Locker, ttl time.Duration) error {
				s, err := lk.Lock(ctx, key, core.WithTTL(ttl), core.WithWait(20*time.Second))
				if err != nil {
					return err
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // the hold
				return s.Unlock(ctx)
			}
			var wg sync.WaitGroup
			for i := range ahead {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 2 { // the second time, queued behind the waiter
						if err := take(fmt.Sprintf("crowd%d.%d", i, round), crowd, time.Minute); err != nil {
							t.Error(err)
							return
						}
					}
				}()
				waitQueued(t, direct, key, int64(i+1))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := take("waiter", l, 300*time.Millisecond); err != nil {
					t.Error(err)
				}
			}()
			waitQueued(t, direct, key, ahead+1)
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			pos := slices.Index(order, "waiter")
			firsts := 0
			for _, name := range order[:pos] {
				if strings.HasSuffix(name, ".0") {
					firsts++
				}
			}
			overtaken := pos - firsts // second rounds, queued after the waiter, ahead of it
			if mutant != "" {
				if overtaken == 0 {
					t.Fatal("control: with refreshes put off by every handover, the waiter still kept its place")
				}
				return
			}
			if overtaken > 0 {
				t.Fatalf("the waiter got the lock after %d acquisitions by waiters that queued after it (order %v)", overtaken, order[:pos+1])
			}
		})
	}
}
