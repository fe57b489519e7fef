package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// LockMulti on one server, a Sentinel deployment and a 3-master Cluster
// (whose names below fall in different slots), each with two Lockers on
// clients of their own, as two processes of a service would.
func TestLockMulti(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st := redistest.StartSentinel(t)
	cl := redistest.StartCluster(t, 3)
	for _, topo := range []struct {
		name string
		c    func() redis.UniversalClient
	}{
		{"single", func() redis.UniversalClient { return srv.Client(t) }},
		{"sentinel", func() redis.UniversalClient { return st.Client(t) }},
		{"cluster", func() redis.UniversalClient { return cl.Client(t) }},
	} {
		t.Run(topo.name, func(t *testing.T) {
			if cc, ok := topo.c().(*redis.ClusterClient); ok {
				slots := map[int64]bool{}
				for _, n := range []string{"multi:a", "multi:b", "multi:c"} {
					slots[cc.ClusterKeySlot(context.Background(), "lockgate:{"+n+"}").Val()] = true
				}
				if len(slots) != 3 {
					t.Fatalf("the names' locks share slots (%v): the Cluster case would not span slots", slots)
				}
			}
			a, b := locktest.Locker(t, topo.c()), locktest.Locker(t, topo.c())
			t.Run("HoldsAllAndReleasesAll", func(t *testing.T) { testMultiHoldsAll(t, a, b) })
			t.Run("AllOrNone", func(t *testing.T) { testMultiAllOrNone(t, a, b) })
			t.Run("OverlappingSetsNeverDeadlock", func(t *testing.T) { testMultiNoDeadlock(t, a, b) })
			t.Run("LostPartEndsLease", func(t *testing.T) { testMultiLost(t, a, topo.c()) })
		})
	}
}

// Every name is held (a TryLock of each from the other Locker is busy), the
// lease's Fence is the highest of the names' fences, a Lock of one name with
// the lease's context re-enters it, and one Unlock releases all of them; a
// second Unlock reports ErrNotHeld.
func testMultiHoldsAll(t *testing.T, a, b *core.Locker) {
	ctx := locktest.Context(t)
	names := []string{"multi:c", "multi:a", "multi:b", "multi:a"}
	s, err := a.LockMulti(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Keys(), []string{"multi:a", "multi:b", "multi:c"}; !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
	var highest int64
	for _, name := range s.Keys() {
		if _, err := b.TryLock(ctx, name); !errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("TryLock(%s) from another Locker while the LockMulti lease holds it = %v, want busy", name, err)
		}
		info, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, info.Fence)
	}
	if s.Fence() != highest || highest == 0 {
		t.Fatalf("Fence = %d, want the highest of the names' fences, %d", s.Fence(), highest)
	}
	for _, name := range s.Keys() {
		info, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.FenceOf(name); got != info.Fence {
			t.Fatalf("FenceOf(%s) = %d, want that lock's fence %d", name, got, info.Fence)
		}
	}
	if s.FenceOf("multi:none") != 0 {
		t.Fatal("FenceOf a name the lease does not hold is not zero")
	}
	in, err := a.Lock(s.Context(), "multi:b")
	if err != nil || !in.Reentrant() {
		t.Fatalf("Lock with the lease's context = %v, %v; want a re-entry", in, err)
	}
	if err := in.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Context().Err() == nil {
		t.Fatal("the lease's context did not end with Unlock")
	}
	for _, name := range s.Keys() {
		o, err := b.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock(%s) after the LockMulti lease's Unlock = %v, want the lock", name, err)
		}
		if err := o.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("a second Unlock = %v, want ErrNotHeld", err)
	}
}

// A name held by another owner makes LockMulti fail, within its budget,
// naming that lock, and the names it had already taken are given back.
// (The names sort before and after the busy one, so one is taken first.)
func testMultiAllOrNone(t *testing.T, a, b *core.Locker) {
	ctx := locktest.Context(t)
	held, err := b.Lock(ctx, "none:b")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	const budget = 300 * time.Millisecond
	start := time.Now()
	_, err = a.LockMulti(ctx, []string{"none:c", "none:b", "none:a"}, core.WithWait(budget))
	took := time.Since(start)
	var busy *core.BusyError
	if !errors.As(err, &busy) || busy.Key != "none:b" {
		t.Fatalf("LockMulti with none:b held elsewhere = %v, want a busy error for none:b", err)
	}
	if took > budget+time.Second {
		t.Errorf("LockMulti took %v of a %v budget", took, budget)
	}
	for _, name := range []string{"none:a", "none:c"} {
		// (A Lock, not a TryLock: a give-back not answered by the budget's
		// end goes on in the background; the release hands it on.)
		o, err := b.Lock(ctx, name, core.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("Lock(%s) after the failed LockMulti = %v: a name it took was not given back", name, err)
		}
		if err := o.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Workers on both Lockers lock overlapping sets given in opposite orders,
// each right after the other has taken its first name: every call gets its
// locks, no two holders of one name overlap. Control: two workers taking
// names in the order given (what LockMulti does not do) deadlock, and
// their waits end busy.
func testMultiNoDeadlock(t *testing.T, a, b *core.Locker) {
	ctx := locktest.Context(t)
	sets := [][]string{{"dl:x", "dl:y", "dl:z"}, {"dl:z", "dl:y", "dl:x"}, {"dl:y", "dl:x"}, {"dl:z", "dl:x"}}
	var ok, busy int
	{
		var mu sync.Mutex
		inside := map[string]bool{}
		var wg sync.WaitGroup
		for i, set := range sets {
			l := a
			if i%2 == 1 {
				l = b
			}
			wg.Go(func() {
				for range 5 {
					s, err := l.LockMulti(ctx, set, core.WithWait(10*time.Second))
					mu.Lock()
					if err != nil {
						if errors.Is(err, core.ErrNotObtained) {
							busy++
						} else {
							t.Errorf("%v: %v", set, err)
						}
						mu.Unlock()
						continue
					}
					ok++
					for _, n := range set {
						if inside[n] {
							t.Errorf("two holders of %s at once", n)
						}
						inside[n] = true
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond) // the work under the locks
					mu.Lock()
					for _, n := range set {
						inside[n] = false
					}
					mu.Unlock()
					s.Unlock(ctx)
				}
			})
		}
		wg.Wait()
	}
	if ok != 5*len(sets) || busy != 0 {
		t.Fatalf("LockMulti: %d of %d calls got their locks, %d busy", ok, 5*len(sets), busy)
	}

	// Control: two workers taking the names in the order given, x then z
	// and z then x, each going on to its second name once the other holds
	// its first, and letting go of its first only once both waits ended:
	// each waits for the other, and both waits end busy.
	var both, tried sync.WaitGroup
	both.Add(2)
	tried.Add(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, names := range [][]string{{"dl:x", "dl:z"}, {"dl:z", "dl:x"}} {
		wg.Go(func() {
			l := []*core.Locker{a, b}[i]
			s, err := l.Lock(ctx, names[0])
			both.Done()
			if err != nil {
				errs[i] = err
				tried.Done()
				return
			}
			defer s.Unlock(ctx)
			both.Wait()
			s2, err := l.Lock(ctx, names[1], core.WithWait(300*time.Millisecond))
			tried.Done()
			tried.Wait()
			if err == nil {
				s2.Unlock(ctx)
			} else {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if !errors.Is(errs[0], core.ErrNotObtained) || !errors.Is(errs[1], core.ErrNotObtained) {
		t.Fatalf("control: locking in the order given ended %v; want both busy (a deadlock until the budgets end)", errs)
	}
}

// Deleting one name's lock in Redis (as a restart without persistence or
// an operator would) ends the lease's Context, with ErrLockLost as the
// cause, within that lock's TTL; the other names stay held until Unlock.
func testMultiLost(t *testing.T, l *core.Locker, c redis.UniversalClient) {
	ctx := locktest.Context(t)
	s, err := l.LockMulti(ctx, []string{"lost:a", "lost:b"}, core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, "lockgate:{lost:b}").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, s.Done(), 3*time.Second, "the LockMulti lease's end after one of its locks was deleted")
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("the lease's context ended with cause %v, want ErrLockLost", cause)
	}
	if n := c.Exists(ctx, "lockgate:{lost:a}").Val(); n != 1 {
		t.Fatal("the other name's lock was not held until Unlock")
	}
	if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of a lease with a lost lock = %v, want ErrNotHeld", err)
	}
	if n := c.Exists(ctx, "lockgate:{lost:a}").Val(); n != 0 {
		t.Fatal("Unlock did not release the name that was still held")
	}
}

// LockMulti on a Redlock Locker: every name is taken on a majority of the
// nodes, the same all-or-none and ordering hold (each name is an ordinary
// Redlock lock).
func TestLockMultiRedlock(t *testing.T) {
	t.Parallel()
	srvs, _ := masters(t, 3)
	a, b := redlockOn(t, srvs), redlockOn(t, srvs)
	t.Run("HoldsAllAndReleasesAll", func(t *testing.T) { testMultiHoldsAll(t, a, b) })
	t.Run("AllOrNone", func(t *testing.T) { testMultiAllOrNone(t, a, b) })
	t.Run("OverlappingSetsNeverDeadlock", func(t *testing.T) { testMultiNoDeadlock(t, a, b) })
}

// A LockMulti whose second name's acquire is answered only after the
// budget (the reply held 1s by a proxy; Redis ran it) fails unavailable
// within its budget, and leaves nothing held: the first name is given back,
// the second undone when its late reply comes. Control: while the
// reply is held, Redis does hold the second name (the acquire ran).
func TestLockMultiLateReply(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, p := locktest.ProxiedLocker(t, srv)
	_, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	h := p.HoldReply(script(t, "acquire", "late:b"), time.Second)
	const budget = 300 * time.Millisecond
	start := time.Now()
	_, err := l.LockMulti(ctx, []string{"late:b", "late:a"}, core.WithWait(budget))
	took := time.Since(start)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("LockMulti whose acquire of late:b was answered late = %v, want ErrUnavailable", err)
	}
	if took > budget+200*time.Millisecond {
		t.Errorf("LockMulti took %v of a %v budget", took, budget)
	}
	if n := direct.Exists(ctx, "lockgate:{late:b}").Val(); n != 1 {
		t.Fatal("control: late:b's acquire did not run in Redis, so the late reply tests nothing")
	}
	// Its budget spent on late:b, the call gave late:a back in the
	// background.
	waitGone(t, direct, "lockgate:{late:a}")
	within(t, h.Released(), 2*time.Second, "the held reply")
	waitGone(t, direct, "lockgate:{late:b}")
}

// A LockMulti whose second name's attempt hangs (the proxy stalls every
// reply once the first name is taken, so the give-back hangs too) returns
// within its budget: what it took is given back in the background, and is
// released once Redis answers again. Control: at the return, while Redis
// still does not answer, the first name is still held (the give-back did
// not go inline).
func TestLockMultiHungGiveBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var p *redistest.Proxy
	var stall sync.Once
	l, p := locktest.ProxiedLocker(t, srv, core.WithObserver(core.ObserverFunc(func(_ context.Context, e core.Event) {
		if e.Kind == core.EventAcquired && e.Key == "hung:a" {
			stall.Do(p.Stall)
		}
	})))
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	held, err := other.Lock(ctx, "hung:b")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	const budget = 300 * time.Millisecond
	start := time.Now()
	_, err = l.LockMulti(ctx, []string{"hung:a", "hung:b"}, core.WithWait(budget))
	took := time.Since(start)
	if err == nil {
		t.Fatal("LockMulti got hung:b, held elsewhere")
	}
	if took > budget+200*time.Millisecond {
		t.Errorf("LockMulti took %v of a %v budget while Redis hung", took, budget)
	}
	if !locktest.Held(t, ctx, direct, "hung:a") {
		t.Fatal("control: hung:a was not held at the return, so the hang tested nothing")
	}
	p.Unstall()
	waitGone(t, direct, locktest.RedisKey("hung:a"))
}

// A Close that overlaps a LockMulti (while its second name's reply is on
// its way) makes it return ErrClosed and leaves nothing held, as Close
// promises of any Lock it overlaps: the first name is given back although
// the Locker is closing.
func TestLockMultiOverlappingClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, p := locktest.ProxiedLocker(t, srv)
	direct := srv.Client(t)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	h := p.HoldReply(script(t, "acquire", "close:b"), 300*time.Millisecond)
	res := make(chan error, 1)
	go func() {
		_, err := l.LockMulti(ctx, []string{"close:a", "close:b"}, core.WithWait(5*time.Second))
		res <- err
	}()
	within(t, h.Matched(), 2*time.Second, "the held acquire of close:b")
	if !locktest.Held(t, ctx, direct, "close:a") {
		t.Fatal("control: close:a was not held while close:b's reply was on its way")
	}
	l.Close()
	if err := <-res; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("LockMulti overlapping Close = %v, want ErrClosed", err)
	}
	for _, name := range []string{"close:a", "close:b"} {
		if locktest.Held(t, ctx, direct, name) {
			t.Errorf("%s is still held after LockMulti returned ErrClosed", name)
		}
	}
}
