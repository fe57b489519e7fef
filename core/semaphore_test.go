package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// semKey is the Redis key of the holders of the semaphore named name.
func semKey(name string) string { return "lockgate:{" + name + "}:sem" }

// semHolders counts the live permits of the semaphore named name in Redis
// (its hash's fields but the permits count, whose expiry has not passed).
func semHolders(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	ctx := context.Background()
	m, err := c.HGetAll(ctx, semKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range m {
		if k == "n" {
			continue
		}
		exp, _, _ := strings.Cut(v, "|")
		if ms, _ := strconv.ParseInt(exp, 10, 64); ms > now.UnixMilli() {
			n++
		}
	}
	return n
}

// semScript matches the semaphore's script "acquire" or "release" on the
// semaphore named name.
func semScript(name, sem string) redistest.Matcher {
	return redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(core.SemaphoreScriptSource(name)))), semKey(sem))
}

// A semaphore of three permits: three leases at once, a fourth is busy;
// TTL and Extend act on one permit; nothing is left in Redis once every
// permit is released.
func TestSemaphoreBasics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	var leases []*core.Lease
	for i := 0; i < 3; i++ {
		s, err := l.Semaphore(ctx, "basic", 3)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, s)
	}
	if n := semHolders(t, direct, "basic"); n != 3 {
		t.Fatalf("%d holders in Redis, want 3", n)
	}
	if d, err := leases[0].TTL(ctx); err != nil || d <= 0 || d > core.DefaultTTL {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := leases[0].Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d, err := leases[0].TTL(ctx); err != nil || d <= core.DefaultTTL {
		t.Fatalf("TTL after Extend(1m) = %v, %v", d, err)
	}
	for _, s := range leases {
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if keys := direct.Keys(ctx, "lockgate:{basic}*").Val(); len(keys) != 0 {
		t.Fatalf("left in Redis after every permit was released: %v", keys)
	}
}

// semContention runs 12 goroutines over two Lockers (on clients a and b),
// each taking a permit of name (of permits) three times in turn, and
// returns the most that were inside at once and how many entries there
// were.
func semContention(t *testing.T, a, b redis.UniversalClient, name string, permits int) (maxIn, ran int32) {
	t.Helper()
	ls := []*core.Locker{locktest.Locker(t, a), locktest.Locker(t, b)}
	ctx := locktest.Context(t)
	g := locktest.NewGauge()
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				s, err := ls[i%2].Semaphore(ctx, name, permits, core.WithWait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				g.Enter()
				time.Sleep(20 * time.Millisecond) // the work
				g.Exit()
				if err := s.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return g.Max(), g.Ran()
}

// testAtMostPermits: at most three holders of a semaphore of three, every
// caller served. Control: the same workload with a count that does not
// limit it (twelve) is seen above three by the same gauge.
func testAtMostPermits(t *testing.T, a, b redis.UniversalClient) {
	t.Run("AtMostPermits", func(t *testing.T) {
		maxIn, ran := semContention(t, a, b, "sem:n", 3)
		t.Logf("3 permits, 12 callers x 3: at most %d inside at once, %d entries", maxIn, ran)
		if maxIn > 3 {
			t.Fatalf("%d holders inside at once, over the 3 permits", maxIn)
		}
		if ran != 36 {
			t.Fatalf("%d of 36 entries", ran)
		}
		if maxIn < 2 {
			t.Fatalf("probe: at most %d inside at once: the permits were never shared", maxIn)
		}
	})
	t.Run("AtMostPermitsControl", func(t *testing.T) {
		maxIn, _ := semContention(t, a, b, "sem:ctl", 12)
		t.Logf("control, 12 permits: %d inside at once", maxIn)
		if maxIn <= 3 {
			t.Fatalf("control: the gauge saw at most %d inside with 12 permits: it cannot see a breach", maxIn)
		}
	})
}

func TestSemaphoreAtMostPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testAtMostPermits(t, srv.Client(t), srv.Client(t))
}

func TestSemaphoreOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	a, b := cl.Client(t), cl.Client(t)
	testAtMostPermits(t, a, b)
	t.Run("FIFO", func(t *testing.T) { testSemaphoreFIFO(t, a, b, b) })
	t.Run("RenewsBesideLocks", func(t *testing.T) { testRenewsBesideLocks(t, a) })
}

// On Sentinel, also WithReplicaAck: a permit is on the replica when
// Semaphore returns; with the replica stopped, ErrNotReplicated within the
// budget and no permit left held. Control: a Locker without the option
// takes its permit from the same master meanwhile.
func TestSemaphoreOnSentinel(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	a, b := sen.Client(t), sen.Client(t)
	testAtMostPermits(t, a, b)
	t.Run("FIFO", func(t *testing.T) { testSemaphoreFIFO(t, a, b, sen.Master.Client(t)) })
	t.Run("ReplicaAck", func(t *testing.T) {
		acked := locktest.Locker(t, sen.Client(t), core.WithReplicaAck(1, 300*time.Millisecond))
		plain := locktest.Locker(t, sen.Client(t))
		master, replica := sen.Master.Client(t), sen.Replica.Client(t)
		ctx := locktest.Context(t)
		waitReplicaAcks(t, master)
		s, err := acked.Semaphore(ctx, "sem:ra", 2)
		if err != nil {
			t.Fatal(err)
		}
		if n := semHolders(t, replica, "sem:ra"); n != 1 {
			t.Fatalf("%d permits on the replica right after Semaphore, want 1", n)
		}
		if err := sen.Replica.Pause(); err != nil {
			t.Fatal(err)
		}
		defer sen.Replica.Resume()
		start := time.Now()
		_, err = acked.Semaphore(ctx, "sem:ra", 2, core.WithWait(500*time.Millisecond))
		if !errors.Is(err, core.ErrNotReplicated) {
			t.Fatalf("Semaphore with the replica stopped = %v, want ErrNotReplicated", err)
		}
		if d := time.Since(start); d > 600*time.Millisecond {
			t.Fatalf("it took %v, over its 500ms budget", d)
		}
		for i := 0; semHolders(t, master, "sem:ra") != 1; i++ {
			if i == 200 {
				t.Fatalf("%d permits held on the master after the refused one, want the first only", semHolders(t, master, "sem:ra"))
			}
			time.Sleep(10 * time.Millisecond) // the undo runs in the background
		}
		ps, err := plain.Semaphore(ctx, "sem:ra", 2, core.WithWait(core.NoWait))
		if err != nil {
			t.Fatalf("control: a Locker without WithReplicaAck = %v", err)
		}
		ps.Unlock(ctx)
		s.Unlock(ctx)
	})
}

// semWaiting waits, at most 5s, until a Semaphore call of name observed by
// events is waiting in the queue (EventWaiting: its entry is in Redis).
func semWaiting(t *testing.T, ctx context.Context, events *locktest.Events, name string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, ok := events.Wait(wctx, locktest.Is(core.EventWaiting, name)); !ok {
		t.Fatalf("no Semaphore call of %s waiting in 5s", name)
	}
}

// semQueueLen is the number of waiters in the semaphore name's queue.
func semQueueLen(c redis.UniversalClient, name string) int64 {
	return c.ZCard(context.Background(), semKey(name)+":q").Val()
}

// testSemaphoreFIFO: with both permits of a semaphore of two held, six
// waiters on two Lockers (clients a, b) get a permit in the order they
// joined its queue (direct sees the queue): each release hands its permit
// to the first live waiter. Control: the same waiters polling with single
// attempts instead of queueing are served in some other order.
func testSemaphoreFIFO(t *testing.T, a, b, direct redis.UniversalClient) {
	ls := []*core.Locker{locktest.Locker(t, a), locktest.Locker(t, b)}
	ctx := locktest.Context(t)
	run := func(name string, queue bool) []int {
		first, err := ls[0].Semaphore(ctx, name, 2, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		second, err := ls[1].Semaphore(ctx, name, 2, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 6
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		polling := make(chan struct{})
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var s *core.Lease
				var err error
				if queue {
					s, err = ls[i%2].Semaphore(ctx, name, 2, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
				} else {
					<-polling
					for {
						s, err = ls[i%2].Semaphore(ctx, name, 2, core.WithWait(core.NoWait), core.WithTTL(time.Minute))
						if !errors.Is(err, core.ErrNotObtained) {
							break
						}
						time.Sleep(time.Millisecond) // a naive caller's poll
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				s.Unlock(ctx)
			}()
			if queue {
				for j := 0; semQueueLen(direct, name) != int64(i+1); j++ {
					if j == 500 {
						t.Fatalf("waiter %d never queued", i)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		close(polling)
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		second.Unlock(ctx)
		return order
	}
	order := run("sem:fifo", true)
	want := []int{0, 1, 2, 3, 4, 5}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("permits went in the order %v, want the joining order %v", order, want)
	}
	// The polling callers start together, so their order is left to chance:
	// up to three rounds, one of which must break the start order.
	for round := 0; ; round++ {
		ctl := run(fmt.Sprintf("sem:fifo-ctl%d", round), false)
		t.Logf("queued: %v; control (polling): %v", order, ctl)
		if len(ctl) != 6 {
			t.Fatalf("control: %d of 6 served", len(ctl))
		}
		if fmt.Sprint(ctl) != fmt.Sprint(want) {
			break
		}
		if round == 2 {
			t.Fatalf("control: polling callers were served in their start order %v three times: the check cannot tell", ctl)
		}
	}
}

func TestSemaphoreFIFO(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testSemaphoreFIFO(t, srv.Client(t), srv.Client(t), srv.Client(t))
}

// Fences increase over the successive permits of a name: permits taken
// together, a waiter granted by a release (above the releaser's), and a
// permit taken after every one was released and the holders' hash deleted
// (the slot's fence floor outlives it).
func TestSemaphoreFences(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	var events locktest.Events
	other, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	var last int64
	next := func(what string, f int64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s: fence %d not above the last one, %d", what, f, last)
		}
		last = f
	}
	var held []*core.Lease
	for i := 0; i < 3; i++ {
		s, err := l.Semaphore(ctx, "fence", 3, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		next("permit "+strconv.Itoa(i), s.Fence())
		held = append(held, s)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		s, err := other.Semaphore(ctx, "fence", 3, core.WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	semWaiting(t, ctx, &events, "fence")
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		t.Fatal("the waiter got no permit")
	}
	if w.Fence() <= held[0].Fence() {
		t.Fatalf("granted fence %d not above the releaser's %d", w.Fence(), held[0].Fence())
	}
	next("granted", w.Fence())
	for _, s := range append(held[1:], w) {
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := direct.Exists(ctx, semKey("fence")).Val(); n != 0 {
		t.Fatal("the holders' hash outlived its last permit")
	}
	s, err := l.Semaphore(ctx, "fence", 3)
	if err != nil {
		t.Fatal(err)
	}
	next("after every permit was released", s.Fence())
	s.Unlock(ctx)
}

// A Semaphore whose acquire reply comes later than its budget (and the
// client's read timeout) reaches Redis once, is answered ErrUnavailable,
// and the permit it took is given back: none is left held, and another
// Locker takes both permits. A waiting Semaphore whose reply is late tries
// again under the same owner: the script runs twice, one permit is held,
// with the fence in Redis. Control: a counter script without an owner, run
// by go-redis itself with the same late reply, counts twice.
func TestSemaphoreLateAcquire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	warmSem(t, l)

	t.Run("budget ends", func(t *testing.T) {
		acquire := semScript("acquire", "late")
		runs := p.Watch(acquire)
		h := p.HoldReply(acquire, lateReply)
		_, err := l.Semaphore(ctx, "late", 2, core.WithWait(core.NoWait))
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Semaphore whose reply came late = %v, want ErrUnavailable", err)
		}
		within(t, h.Answered(), 2*time.Second, "the held acquire ran")
		if n := runs.Count(); n != 1 {
			t.Fatalf("%d acquire scripts reached Redis, want one", n)
		}
		for i := 0; semHolders(t, direct, "late") != 0; i++ {
			if i == 300 {
				t.Fatalf("%d permits still held after the undo, want 0", semHolders(t, direct, "late"))
			}
			time.Sleep(10 * time.Millisecond) // the undo runs in the background
		}
		for i := 0; i < 2; i++ {
			s, err := other.Semaphore(ctx, "late", 2, core.WithWait(core.NoWait))
			if err != nil {
				t.Fatalf("permit %d after the undo: %v", i, err)
			}
			defer s.Unlock(ctx)
		}
	})

	t.Run("retried by a waiting call", func(t *testing.T) {
		acquire := semScript("acquire", "late2")
		runs := p.Watch(acquire)
		p.HoldReply(acquire, lateReply)
		s, err := l.Semaphore(ctx, "late2", 2, core.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if n := runs.Count(); n < 2 {
			t.Fatalf("%d acquire scripts reached Redis, want 2 or more: the fault did not happen", n)
		}
		if n := semHolders(t, direct, "late2"); n != 1 {
			t.Fatalf("%d permits held after one Semaphore whose script ran %d times, want 1", n, runs.Count())
		}
		for _, v := range direct.HGetAll(ctx, semKey("late2")).Val() {
			if f := strings.Split(v, "|"); len(f) > 1 && f[1] != strconv.FormatInt(s.Fence(), 10) {
				t.Fatalf("fence in Redis %s, lease %d", f[1], s.Fence())
			}
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := semHolders(t, direct, "late2"); n != 0 {
			t.Fatalf("%d permits held after the only Unlock", n)
		}
	})

	t.Run("control", func(t *testing.T) {
		naive := redis.NewScript(`return redis.call('HINCRBY', KEYS[1], 'held', 1)`)
		if err := naive.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		m := redistest.MatchCommand("evalsha", naive.Hash(), "naive")
		p.HoldReply(m, lateReply)
		if err := naive.Run(ctx, c, []string{"naive"}).Err(); err != nil {
			t.Logf("the control's call: %v", err)
		}
		if n, _ := direct.HGet(ctx, "naive", "held").Int(); n < 2 {
			t.Fatalf("control: a naive acquire re-sent after a late reply counted %d permits, want 2 or more", n)
		} else {
			t.Logf("control: one naive acquire, %d permits counted", n)
		}
	})
}

// warmSem takes and releases a permit, so that the Locker has checked its
// server and Redis has the semaphore's scripts cached.
func warmSem(t *testing.T, l *core.Locker) {
	t.Helper()
	ctx := locktest.Context(t)
	s, err := l.Semaphore(ctx, "warm", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A release whose reply is late runs twice (the Locker sends it again, with
// a done marker) and frees one permit: with two permits held by two
// Lockers and a waiter, the first run hands the permit to the waiter, and
// the second frees nothing: two permits held, a third caller busy; Unlock
// answers nil. Control: a counter release without an owner, run by
// go-redis with the same late reply, frees two.
func TestSemaphoreLateRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	var events locktest.Events
	third, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	warmSem(t, l)

	s, err := l.Semaphore(ctx, "rel", 2, core.WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := other.Semaphore(ctx, "rel", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		w, err := third.Semaphore(ctx, "rel", 2, core.WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	semWaiting(t, ctx, &events, "rel")
	release := semScript("release", "rel")
	runs := p.Watch(release)
	h := p.HoldReply(release, lateReply)
	err = s.Unlock(ctx)
	within(t, h.Matched(), time.Second, "the held release")
	if n := runs.Count(); n < 2 {
		t.Fatalf("%d release scripts reached Redis, want 2 or more: the fault did not happen (Unlock: %v)", n, err)
	}
	if err != nil {
		t.Fatalf("Unlock whose release ran twice = %v, want nil", err)
	}
	w := <-got
	if w == nil {
		t.Fatal("the waiter got no permit")
	}
	defer w.Unlock(ctx)
	if n := semHolders(t, direct, "rel"); n != 2 {
		t.Fatalf("%d permits held after a release that ran %d times, want 2 (the other Locker's and the waiter's)", n, runs.Count())
	}
	if _, err := third.Semaphore(ctx, "rel", 2, core.WithWait(core.NoWait)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("a third permit of two = %v, want ErrNotObtained", err)
	}

	naive := redis.NewScript(`return redis.call('HINCRBY', KEYS[1], 'held', -1)`)
	if err := naive.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	direct.HSet(ctx, "naive-rel", "held", 2)
	p.HoldReply(redistest.MatchCommand("evalsha", naive.Hash(), "naive-rel"), lateReply)
	if err := naive.Run(ctx, c, []string{"naive-rel"}).Err(); err != nil {
		t.Logf("the control's call: %v", err)
	}
	n, _ := direct.HGet(ctx, "naive-rel", "held").Int()
	t.Logf("control: one naive release of two permits leaves %d held", n)
	if n > 0 {
		t.Fatalf("control: a naive release re-sent after a late reply left %d of 2 held, want 0 or fewer", n)
	}
}

// A permit whose entry is deleted in Redis is lost at the next renewal
// (TTL/3), well before its TTL: its Context ends with ErrLockLost. The
// other permit of the same Locker and name, renewed in the same batch,
// stays held (the control: the renewal itself works).
func TestSemaphoreLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	ttl := 3 * time.Second
	gone, err := l.Semaphore(ctx, "lost", 2, core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := l.Semaphore(ctx, "lost", 2, core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Unlock(ctx)
	owner := ""
	for k, v := range direct.HGetAll(ctx, semKey("lost")).Val() {
		if strings.HasSuffix(v, "|"+strconv.FormatInt(gone.Fence(), 10)) {
			owner = k
		}
	}
	if owner == "" {
		t.Fatal("the permit's entry is not in Redis")
	}
	start := time.Now()
	if err := direct.HDel(ctx, semKey("lost"), owner).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, gone.Done(), ttl/2+500*time.Millisecond, "loss noticed")
	took := time.Since(start)
	if cause := context.Cause(gone.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	t.Logf("lost %v after its entry was deleted (TTL %v)", took, ttl)
	if kept.Context().Err() != nil {
		t.Fatalf("the other permit's context ended too: %v", context.Cause(kept.Context()))
	}
	if d, err := kept.TTL(ctx); err != nil || d <= ttl/2 {
		t.Fatalf("the other permit after the batch that lost one: TTL %v, %v; want renewed", d, err)
	}
	if err := gone.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld", err)
	}
}

// A holder that dies (no watchdog, no release) gives its permit back when
// its TTL passes: a waiter gets it then. Control: a holder whose watchdog
// renews keeps it past its TTL, and the waiter is busy.
func TestSemaphoreDeadHolderExpires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	ttl := 300 * time.Millisecond
	if _, err := l.Semaphore(ctx, "dead", 1, core.WithTTL(ttl), core.WithoutWatchdog()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := other.Semaphore(ctx, "dead", 1, core.WithWait(3*time.Second))
	if err != nil {
		t.Fatalf("the permit of a holder gone silent: %v", err)
	}
	t.Logf("permit back %v after it was taken (TTL %v)", time.Since(start), ttl)
	s.Unlock(ctx)

	alive, err := l.Semaphore(ctx, "alive", 1, core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Unlock(ctx)
	if _, err := other.Semaphore(ctx, "alive", 1, core.WithWait(3*ttl)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("control: the permit of a renewed holder = %v, want ErrNotObtained", err)
	}
}

// What Semaphore answers: busy within its budget (a *BusyError with the
// time until the first permit held expires), Redis down (ErrUnavailable
// naming the cause), bad permits (ErrInvalid naming them), a count other
// than the holders' (ErrInvalid naming both; accepted again once they are
// gone), Redlock (ErrUnsupported, nothing sent), a closed Locker.
func TestSemaphoreOutcomes(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)

	t.Run("busy", func(t *testing.T) {
		s, err := l.Semaphore(ctx, "out:busy", 1, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unlock(ctx)
		start := time.Now()
		_, err = other.Semaphore(ctx, "out:busy", 1, core.WithWait(300*time.Millisecond))
		took := time.Since(start)
		var be *core.BusyError
		if !errors.Is(err, core.ErrNotObtained) || !errors.As(err, &be) {
			t.Fatalf("Semaphore with no permit free = %v, want a *BusyError", err)
		}
		if took < 300*time.Millisecond || took > 350*time.Millisecond+50*time.Millisecond {
			t.Fatalf("busy after %v, want its 300ms budget (+50ms)", took)
		}
		if be.HolderTTL <= 30*time.Second {
			t.Fatalf("HolderTTL %v, want the holder's remaining minute", be.HolderTTL)
		}
		if be.Permits != 1 || !strings.Contains(be.Error(), `semaphore "out:busy": no permit of 1 free`) {
			t.Fatalf("busy semaphore: Permits %d, %q: want 1, and the text to speak of its permits", be.Permits, be.Error())
		}
		// A lock's busy answer is a lock's.
		lk, err := l.Lock(ctx, "out:lockbusy", core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		_, err = other.TryLock(ctx, "out:lockbusy")
		if !errors.As(err, &be) || be.Permits != 0 || !strings.Contains(be.Error(), `lock "out:lockbusy" not obtained`) {
			t.Fatalf("busy lock: %v, want a lock's *BusyError", err)
		}
	})

	t.Run("invalid permits", func(t *testing.T) {
		for _, n := range []int{0, -1} {
			_, err := l.Semaphore(ctx, "out:inv", n)
			if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "permits") {
				t.Fatalf("permits %d = %v, want ErrInvalid naming permits", n, err)
			}
		}
	})

	t.Run("permits mismatch", func(t *testing.T) {
		s, err := l.Semaphore(ctx, "out:mis", 3)
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Semaphore(ctx, "out:mis", 2, core.WithWait(time.Second))
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "permits 2") || !strings.Contains(err.Error(), "permits 3") {
			t.Fatalf("permits 2 while the holders passed 3 = %v, want ErrInvalid naming both", err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s2, err := other.Semaphore(ctx, "out:mis", 2)
		if err != nil {
			t.Fatalf("permits 2 once the holders of 3 are gone: %v", err)
		}
		s2.Unlock(ctx)
	})

	t.Run("redis down", func(t *testing.T) {
		down := redistest.Start(t)
		dl, _ := locktest.NewLocker(t, down)
		warmSem(t, dl)
		down.Stop()
		start := time.Now()
		_, err := dl.Semaphore(ctx, "out:down", 2)
		if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Semaphore with Redis stopped = %v, want ErrUnavailable naming the refusal", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("it took %v", d)
		}
	})

	t.Run("redlock", func(t *testing.T) {
		var cs []redis.UniversalClient
		for _, s := range redistest.StartN(t, 3) {
			cs = append(cs, s.Client(t))
		}
		rl, err := core.NewRedlock(cs)
		if err != nil {
			t.Fatal(err)
		}
		defer rl.Close()
		if _, err := rl.Semaphore(ctx, "out:rl", 2); !errors.Is(err, core.ErrUnsupported) {
			t.Fatalf("Semaphore on a Redlock Locker = %v, want ErrUnsupported", err)
		}
		if n := cs[0].Exists(ctx, semKey("out:rl")).Val(); n != 0 {
			t.Fatal("the refused call left a permit")
		}
	})

	t.Run("closed", func(t *testing.T) {
		cl, _ := locktest.NewLocker(t, srv)
		cl.Close()
		if _, err := cl.Semaphore(ctx, "out:closed", 2); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("Semaphore after Close = %v, want ErrClosed", err)
		}
	})
}

// Semaphore is not re-entrant, and a permit and a lock of one name never
// re-enter each other: Semaphore with a permit's Context takes another
// permit (a third of two is busy), Lock with it takes the lock afresh, and
// Semaphore with a lock's Context takes a permit. Control: Lock with the
// lock's Context does re-enter it.
func TestSemaphoreNotReentrant(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s1, err := l.Semaphore(ctx, "re", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Unlock(ctx)
	s2, err := l.Semaphore(s1.Context(), "re", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Unlock(ctx)
	if s2.Reentrant() || s2.Fence() == s1.Fence() {
		t.Fatalf("Semaphore with a permit's Context: reentrant %v, fence %d (first %d); want a permit of its own", s2.Reentrant(), s2.Fence(), s1.Fence())
	}
	if n := semHolders(t, direct, "re"); n != 2 {
		t.Fatalf("%d permits held, want 2", n)
	}
	if _, err := l.Semaphore(s2.Context(), "re", 2, core.WithWait(core.NoWait)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("a third permit of two with a permit's Context = %v, want ErrNotObtained", err)
	}
	lk, err := l.Lock(s1.Context(), "re")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	if lk.Reentrant() || !locktest.Held(t, ctx, direct, "re") {
		t.Fatal("Lock with a permit's Context of the same name did not take the lock afresh")
	}
	p, err := l.Semaphore(lk.Context(), "re2", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Unlock(ctx)
	lk2, err := l.Lock(ctx, "re2")
	if err != nil {
		t.Fatal(err)
	}
	defer lk2.Unlock(ctx)
	p2, err := l.Semaphore(lk2.Context(), "re2", 2, core.WithWait(core.NoWait))
	if err == nil {
		defer p2.Unlock(ctx)
	}
	if !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Semaphore (2) with a lock's Context while the one permit of 1 is held = %v, want the count mismatch, not a re-entry", err)
	}
	p3, err := l.Semaphore(lk2.Context(), "re2", 1, core.WithWait(core.NoWait))
	if !errors.Is(err, core.ErrNotObtained) {
		p3.Unlock(ctx)
		t.Fatalf("Semaphore with a lock's Context while its one permit is held = %v, want ErrNotObtained", err)
	}
	in, err := l.Lock(lk2.Context(), "re2")
	if err != nil || !in.Reentrant() {
		t.Fatalf("control: Lock with the lock's own Context = %v, reentrant %v; want a re-entry", err, in.Reentrant())
	}
	in.Unlock(ctx)
}

// Shutdown releases the permits it holds: a waiter on another Locker gets
// one at once, not after the TTL (a minute); the leases' contexts end
// with ErrClosed. Close leaves them to expire, as it leaves locks, and ends
// its leases' contexts and its waiting calls with ErrClosed.
func TestSemaphoreShutdownAndClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	var events locktest.Events
	other, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	var held []*core.Lease
	for i := 0; i < 2; i++ {
		s, err := l.Semaphore(ctx, "shut", 2, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	got := make(chan error, 1)
	go func() {
		s, err := other.Semaphore(ctx, "shut", 2, core.WithWait(10*time.Second))
		if err == nil {
			s.Unlock(ctx)
		}
		got <- err
	}()
	semWaiting(t, ctx, &events, "shut")
	start := time.Now()
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter after Shutdown: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter got no permit within 2s of Shutdown")
	}
	t.Logf("waiter served %v after Shutdown (TTL 1m)", time.Since(start))
	for _, s := range held {
		if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrClosed) {
			t.Fatalf("cause after Shutdown %v, want ErrClosed", cause)
		}
	}

	c, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	s, err := c.Semaphore(ctx, "close", 1, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Semaphore(ctx, "close", 1, core.WithWait(10*time.Second))
		waiting <- err
	}()
	semWaiting(t, ctx, &events, "close")
	c.Close()
	if err := <-waiting; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("a waiting Semaphore at Close = %v, want ErrClosed", err)
	}
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrClosed) {
		t.Fatalf("cause after Close %v, want ErrClosed", cause)
	}
	if n := semHolders(t, direct, "close"); n != 1 {
		t.Fatalf("%d permits after Close, want its one left to expire", n)
	}
}

// An uncontended Semaphore and Unlock: two scripts, and nothing left
// behind but the slot's fence floor. The commands the scripts run are
// logged. Control: the counts see a Lock cycle's scripts too.
func TestSemaphoreUncontendedCycle(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	warmSem(t, l)
	const n = 50
	before := allCommands(t, direct)
	for i := 0; i < n; i++ {
		s, err := l.Semaphore(ctx, "lean:"+strconv.Itoa(i), 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d := diffCommands(before, allCommands(t, direct))
	var per []string
	for name, c := range d {
		per = append(per, fmt.Sprintf("%s %.2f", name, float64(c)/n))
	}
	t.Logf("per Semaphore+Unlock cycle: %s", strings.Join(per, ", "))
	if d["evalsha"] != 2*n {
		t.Fatalf("%d scripts for %d cycles, want 2 each", d["evalsha"], n)
	}
	if keys := direct.Keys(ctx, "lockgate:{lean:*").Val(); len(keys) != 0 {
		t.Fatalf("left behind: %v", keys)
	}
	before = allCommands(t, direct)
	s, err := l.Lock(ctx, "lean:lock")
	if err != nil {
		t.Fatal(err)
	}
	s.Unlock(ctx)
	if d := diffCommands(before, allCommands(t, direct)); d["evalsha"]+d["hdel"] != 2 {
		t.Fatalf("control: a Lock cycle counted %d scripts and %d HDEL, want 2 calls", d["evalsha"], d["hdel"])
	}
}

// testRenewsBesideLocks: one Locker's watchdog renews a lock and a permit
// of the same name (due together, so mostly in one batch: one hash slot,
// two script calls) past three TTLs; both are held in Redis after. Control: the same two without
// the watchdog have expired by then.
func testRenewsBesideLocks(t *testing.T, c redis.UniversalClient) {
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	ttl := 300 * time.Millisecond
	take := func(name string, opts ...core.LockOption) (*core.Lease, *core.Lease) {
		t.Helper()
		opts = append(opts, core.WithTTL(ttl))
		lk, err := l.Lock(ctx, name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := l.Semaphore(ctx, name, 2, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return lk, p
	}
	lk, p := take("mix")
	clk, cp := take("mix-ctl", core.WithoutWatchdog())
	time.Sleep(3 * ttl) // three TTLs pass: the renewals, or the expiries, happen meanwhile
	for _, s := range []*core.Lease{lk, p} {
		if s.Context().Err() != nil {
			t.Fatalf("a lease renewed beside the other kind ended: %v", context.Cause(s.Context()))
		}
		if d, err := s.TTL(ctx); err != nil || d <= 0 {
			t.Fatalf("TTL after three TTLs = %v, %v: want renewed", d, err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*core.Lease{clk, cp} {
		if _, err := s.TTL(ctx); !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("control: TTL of a lease without the watchdog after three TTLs = %v, want ErrNotHeld", err)
		}
	}
}

func TestSemaphoreRenewsBesideLocks(t *testing.T) {
	t.Parallel()
	testRenewsBesideLocks(t, redistest.Start(t).Client(t))
}

// With WithHolderTag a permit's holder tag is stored with it, and a caller
// that finds no permit free is told the tag of the permit that expires
// first.
func TestSemaphoreHolderTag(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	type tagKey struct{}
	tag := core.WithHolderTag(func(ctx context.Context) string { s, _ := ctx.Value(tagKey{}).(string); return s })
	events := &locktest.Events{}
	l, _ := locktest.NewLocker(t, srv, tag, core.WithObserver(events))
	ctx := locktest.Context(t)
	first, err := l.Semaphore(context.WithValue(ctx, tagKey{}, "first"), "tag", 2, core.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Unlock(ctx)
	second, err := l.Semaphore(context.WithValue(ctx, tagKey{}, "second"), "tag", 2, core.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(ctx)
	_, err = l.Semaphore(context.WithValue(ctx, tagKey{}, "third"), "tag", 2, core.WithWait(core.NoWait))
	if !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("a third permit of two = %v", err)
	}
	e, ok := events.Wait(ctx, locktest.Is(core.EventNotObtained, "tag"))
	if !ok || e.HolderTag != "first" {
		t.Fatalf("busy event's holder tag %q, want the first-expiring holder's, \"first\"", e.HolderTag)
	}
}

// A single attempt never jumps a queue of live waiters: with the one
// permit free in Redis (its holder expired without a release) and a live
// waiter whose retry is held back (its network stalled), another caller is
// answered busy, and its attempt hands the permit to the waiter in Redis,
// as a release would have; the waiter then has it. Control: once the
// waiter is served and gone, the same single attempt gets the permit.
func TestSemaphoreNoJump(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	p, waiter := proxiedLocker(t, srv)
	ctx := locktest.Context(t)
	if _, err := holder.Semaphore(ctx, "nojump", 1, core.WithTTL(400*time.Millisecond), core.WithoutWatchdog()); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		s, err := waiter.Semaphore(ctx, "nojump", 1, core.WithWait(10*time.Second), core.WithTTL(time.Minute))
		if err == nil {
			err = s.Unlock(context.WithoutCancel(ctx))
		}
		res <- err
	}()
	for i := 0; semQueueLen(direct, "nojump") != 1; i++ {
		if i == 500 {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stall()
	defer p.Unstall()
	for i := 0; semHolders(t, direct, "nojump") != 0; i++ {
		if i == 200 {
			t.Fatal("the holder's permit never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	queued := direct.ZRange(ctx, semKey("nojump")+":q", 0, -1).Val()
	if len(queued) != 1 {
		t.Fatalf("probe: %d waiters queued, want the stalled one", len(queued))
	}
	if _, err := other.Semaphore(ctx, "nojump", 1, core.WithWait(core.NoWait)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("a single attempt with a live waiter queued = %v, want ErrNotObtained", err)
	}
	if v := direct.HGet(ctx, semKey("nojump"), queued[0]).Val(); v == "" {
		t.Fatal("the stalled waiter was not handed the permit in Redis")
	}
	p.Unstall()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("the stalled waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled waiter did not get its permit within 5s of its network coming back")
	}
	s, err := other.Semaphore(ctx, "nojump", 1, core.WithWait(core.NoWait))
	if err != nil {
		t.Fatalf("control: a single attempt with nobody queued: %v", err)
	}
	s.Unlock(ctx)
}

// The server paused past a permit's TTL: renewals cannot get through, and
// the holder's context is cancelled (ErrLockLost) at the end of its
// validity, before the server, once resumed, gives the permit to a waiter.
func TestSemaphoreLostBeforeOtherWhenServerPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	ttl := 300 * time.Millisecond
	s, err := a.Semaphore(ctx, "paused", 1, core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	var lostAt atomic.Int64
	stop := context.AfterFunc(s.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	defer stop()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 200*time.Millisecond) // the fault: the server stays stopped past the TTL
	got := make(chan int64, 1)
	go func() {
		s2, err := b.Semaphore(ctx, "paused", 1, core.WithWait(5*time.Second))
		at := time.Now().UnixNano()
		if err != nil {
			t.Error(err)
		} else {
			s2.Unlock(ctx)
		}
		got <- at
	}()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	at := <-got
	within(t, s.Done(), time.Second, "lease context cancelled")
	if cause := context.Cause(s.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if l := lostAt.Load(); l == 0 || l >= at {
		t.Fatalf("holder learned of the loss at %d, the other caller got the permit at %d: must be before", l, at)
	}
}

// A semaphore's events carry its permits count, so that an Observer (the
// metrics) tells permits from locks; a lock's carry 0. Each kind a permit
// goes through is checked: acquired, extended, waiting, not obtained,
// released; then the lock of the same name.
func TestSemaphoreEventsCarryPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var mu sync.Mutex
	seen := map[string]int{} // "<kind>" → Permits of the last such event
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		mu.Lock()
		seen[e.Kind.String()] = e.Permits
		mu.Unlock()
	})
	check := func(what string, want int, kinds ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, kind := range kinds {
			if n, ok := seen[kind]; !ok || n != want {
				t.Errorf("%s: %s event Permits %d (seen %v), want %d", what, kind, n, ok, want)
			}
		}
		clear(seen)
	}
	l, _ := locktest.NewLocker(t, srv, core.WithObserver(obs))
	ctx := locktest.Context(t)
	s, err := l.Semaphore(ctx, "sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Semaphore(ctx, "sem", 1, core.WithWait(50*time.Millisecond)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("a second permit of 1: %v, want busy", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("a permit", 1, "acquired", "extended", "waiting", "not_obtained", "released")
	lk, err := l.Lock(ctx, "sem")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("a lock", 0, "acquired", "released")
}

// A semaphore waiter handed a permit before its Locker subscribed to the
// semaphore's channel (the release ran while the reply of its queueing
// attempt was held, so the grant's message reached no one) holds the permit
// as soon as the reply comes: the check after the subscription finds the
// semaphore's hash, which has no owner field, and wakes the waiter, whose
// attempt finds its own permit. Its refresh is 20s away and its budget 8s.
// On one server and on a 3-master Cluster. Control: a check that wakes only
// a waiter named by the owner field ("check-owner") leaves it busy at its
// budget.
func TestSemaphoreGrantBeforeSubscription(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		for _, mutant := range []string{"", "check-owner"} {
			t.Run(topo+"/mutant="+mutant, func(t *testing.T) {
				t.Parallel()
				testSemaphoreGrantBeforeSubscription(t, topo == "cluster", mutant)
			})
		}
	}
}

func testSemaphoreGrantBeforeSubscription(t *testing.T, cluster bool, mutant string) {
	const sem = "early-sem"
	var direct redis.UniversalClient
	var l *core.Locker
	var p *redistest.Proxy // the proxy of the semaphore's node
	if cluster {
		cl := redistest.StartCluster(t, 3)
		direct = cl.Client(t)
		cc, ps := proxiedClusterClient(t, cl, proxiedTimeout)
		l = locktest.Locker(t, cc, core.WithMutants(mutant))
		p = proxyOfSlot(t, cl, ps, int(direct.ClusterKeySlot(context.Background(), semKey(sem)).Val()))
	} else {
		srv := redistest.Start(t)
		direct = srv.Client(t)
		l, p = locktest.ProxiedLocker(t, srv, core.WithMutants(mutant))
	}
	holder := locktest.Locker(t, direct)
	warmSem(t, l)
	ctx := locktest.Context(t)
	s, err := holder.Semaphore(ctx, sem, 1, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h := p.HoldReply(semScript("acquire", sem), 1500*time.Millisecond)
	res := timedTake(ctx, func() (*core.Lease, error) {
		return l.Semaphore(ctx, sem, 1, core.WithTTL(time.Minute), core.WithWait(8*time.Second))
	})
	within(t, h.Matched(), 5*time.Second, "the waiter's attempt")
	within(t, h.Answered(), 5*time.Second, "the waiter's attempt ran")
	releaseWhileHeld(t, ctx, s, h)
	if n := direct.HLen(ctx, semKey(sem)).Val(); n < 2 { // the permit and the count
		t.Fatalf("probe: the release handed the permit to no one (%d fields)", n)
	}
	r := <-res
	if mutant != "" {
		if !errors.Is(r.err, core.ErrNotObtained) {
			t.Fatalf("control: waiter = %v after %v, want busy at its budget", r.err, r.took)
		}
		return
	}
	if r.err != nil || r.took > 4*time.Second {
		t.Fatalf("waiter = %v after %v: the permit granted before it subscribed was not found until its refresh", r.err, r.took)
	}
}

// A Semaphore refused for another permits count fails ErrInvalid even when
// a later reply of the same pipeline fails: go-redis then sets that error on
// every command of the pipeline, the refusal's included. Here the refusal
// comes with WithReplicaAck's WAIT, which a server without replicas leaves
// unanswered until the call's 400ms deadline (ContextTimeoutEnabled); on one
// server and on a 3-master Cluster (the WAIT goes to the key's master).
// Control: permits-after-err reads the refusal only from a command without
// an error, and the call ends unavailable instead.
func TestSemaphorePermitsRefusalBesideFailedWait(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "cluster"}[cluster], func(t *testing.T) {
			t.Parallel()
			fixedAndControl(t, "permits-after-err", func(t *testing.T, control bool, opts []core.Option) {
				var plainClient, ackClient redis.UniversalClient
				if cluster {
					cl := redistest.StartCluster(t, 3)
					plainClient = cl.Client(t)
					o := cl.Options()
					o.ContextTimeoutEnabled, o.MaxRetries = true, -1
					ackClient = redis.NewClusterClient(o)
				} else {
					srv := redistest.Start(t)
					plainClient = srv.Client(t)
					ackClient = redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
				}
				t.Cleanup(func() { ackClient.Close() })
				plain := locktest.Locker(t, plainClient)
				ctx := locktest.Context(t)
				s, err := plain.Semaphore(ctx, "refused:sem", 3)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Unlock(ctx)
				acked := locktest.Locker(t, ackClient, append(opts, core.WithReplicaAck(1, 2*time.Second))...)
				cctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
				defer cancel()
				_, err = acked.Semaphore(cctx, "refused:sem", 2)
				if control {
					if errors.Is(err, core.ErrInvalid) {
						t.Fatalf("control: %v, the refusal survived; the test cannot tell", err)
					}
					t.Logf("control: %v", err)
					return
				}
				if !errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "3") {
					t.Fatalf("Semaphore with permits 2 beside holders of 3, its WAIT unanswered = %v, want ErrInvalid naming 3", err)
				}
			})
		})
	}
}
