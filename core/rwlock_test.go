package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// readers counts the live readers of the lock named name in Redis: the
// lock hash's entries "<expiry ms>|<fence>[|tag]" whose expiry has not
// passed.
func readers(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	ctx := context.Background()
	m, err := c.HGetAll(ctx, locktest.RedisKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range m {
		exp, _, ok := strings.Cut(v, "|")
		if len(k) == 1 || !ok {
			continue
		}
		if ms, _ := strconv.ParseInt(exp, 10, 64); ms > now.UnixMilli() {
			n++
		}
	}
	return n
}

// rlockScript matches a reader's script "acquire" or "release" on the lock
// named name.
func rlockScript(name, lock string) redistest.Matcher {
	return redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(core.RLockScriptSource(name)))), locktest.RedisKey(lock))
}

// Readers share a lock, on one Locker and across two; a writer is busy
// while any holds it, and readers are busy while a writer holds it; each
// read lease has its own fence, TTL and Extend; Inspect counts the
// readers; nothing but the slot's fence floor is left once all are
// released.
func TestRLockBasics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testRLockBasics(t, srv.Client(t), srv.Client(t))
}

func testRLockBasics(t *testing.T, c, direct redis.UniversalClient) {
	l, other := locktest.Locker(t, c), locktest.Locker(t, c)
	ctx := locktest.Context(t)
	r1, err := l.RLock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := other.RLock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	r3, err := l.RLock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if n := readers(t, direct, "rw"); n != 3 {
		t.Fatalf("%d readers in Redis, want 3", n)
	}
	if info, err := l.Inspect(ctx, "rw"); err != nil || info.Readers != 3 || info.Held || info.TTL <= 0 {
		t.Fatalf("Inspect with three readers = %+v, %v; want Readers 3, not Held, a TTL", info, err)
	}
	if r1.Fence() == r2.Fence() || r2.Fence() == r3.Fence() || r3.Reentrant() {
		t.Fatalf("fences %d %d %d, reentrant %v: want a hold of its own each", r1.Fence(), r2.Fence(), r3.Fence(), r3.Reentrant())
	}
	if d, err := r1.TTL(ctx); err != nil || d <= 0 || d > core.DefaultTTL {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := r1.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d, _ := r1.TTL(ctx); d <= core.DefaultTTL {
		t.Fatalf("TTL after Extend(1m) = %v", d)
	}
	if d, _ := r2.TTL(ctx); d > core.DefaultTTL {
		t.Fatalf("another reader's TTL %v grew with the first's Extend", d)
	}
	_, err = other.Lock(ctx, "rw", core.WithWait(core.NoWait))
	var busy *core.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("Lock while readers hold = %v, want a *BusyError", err)
	}
	for _, r := range []*core.Lease{r1, r2, r3} {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h := locktest.RedisKey("rw")
	if n := direct.Exists(ctx, h, h+":q", h+":qt").Val(); n != 0 {
		t.Fatalf("%d of the lock's keys left after every reader's Unlock", n)
	}
	w, err := other.Lock(ctx, "rw", core.WithWait(core.NoWait))
	if err != nil {
		t.Fatalf("Lock once the readers are gone = %v", err)
	}
	if w.Fence() <= r3.Fence() {
		t.Fatalf("writer's fence %d not above the readers' (%d)", w.Fence(), r3.Fence())
	}
	if info, err := l.Inspect(ctx, "rw"); err != nil || info.Readers != 0 || !info.Held || info.Fence != w.Fence() {
		t.Fatalf("Inspect with a writer = %+v, %v; want Held, its fence, no readers", info, err)
	}
	if _, err := l.RLock(ctx, "rw", core.WithWait(core.NoWait)); !errors.As(err, &busy) {
		t.Fatalf("RLock while a writer holds = %v, want a *BusyError", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r4, err := l.RLock(ctx, "rw", core.WithWait(core.NoWait))
	if err != nil {
		t.Fatalf("RLock after the writer's Unlock = %v", err)
	}
	if r4.Fence() <= w.Fence() {
		t.Fatalf("reader's fence %d not above the writer's (%d)", r4.Fence(), w.Fence())
	}
	r4.Unlock(ctx)
}

// rwGauge watches readers and writers inside a critical section: a writer
// with anyone else inside, or a reader with a writer, is a breach.
type rwGauge struct {
	mu                        sync.Mutex
	readers, writers          int
	maxReaders, breaches, ran int
}

func (g *rwGauge) enter(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ran++
	if write {
		if g.readers > 0 || g.writers > 0 {
			g.breaches++
		}
		g.writers++
		return
	}
	if g.writers > 0 {
		g.breaches++
	}
	g.readers++
	g.maxReaders = max(g.maxReaders, g.readers)
}

func (g *rwGauge) exit(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if write {
		g.writers--
	} else {
		g.readers--
	}
}

// rwContention runs 12 callers over two Lockers (clients a and b) on the
// lock named name, 4 writers and 8 readers, three entries each; writers
// take Lock, or RLock when naive (the control). It returns the gauge.
func rwContention(t *testing.T, a, b redis.UniversalClient, name string, naive bool) *rwGauge {
	t.Helper()
	ls := []*core.Locker{locktest.Locker(t, a), locktest.Locker(t, b)}
	ctx := locktest.Context(t)
	g := &rwGauge{}
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write := i%3 == 0
			for range 3 {
				take := ls[i%2].RLock
				if write && !naive {
					take = ls[i%2].Lock
				}
				s, err := take(ctx, name, core.WithWait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				g.enter(write)
				time.Sleep(10 * time.Millisecond) // the work
				g.exit(write)
				if err := s.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return g
}

// testReadersWriters: a writer is never inside with anyone, readers are
// inside together, every caller is served. Control: the same workload with
// the writers taking RLock is seen breaching by the same gauge.
func testReadersWriters(t *testing.T, a, b redis.UniversalClient) {
	t.Run("WriterExcludesReaders", func(t *testing.T) {
		g := rwContention(t, a, b, "rw:n", false)
		t.Logf("4 writers, 8 readers x 3: %d breaches, at most %d readers at once, %d entries", g.breaches, g.maxReaders, g.ran)
		if g.breaches > 0 {
			t.Fatalf("%d entries with a writer inside beside another holder", g.breaches)
		}
		if g.ran != 36 {
			t.Fatalf("%d of 36 entries", g.ran)
		}
		if g.maxReaders < 2 {
			t.Fatalf("probe: at most %d readers at once: the lock was never shared", g.maxReaders)
		}
	})
	t.Run("Control", func(t *testing.T) {
		g := rwContention(t, a, b, "rw:ctl", true)
		t.Logf("control, writers taking RLock: %d breaches", g.breaches)
		if g.breaches == 0 {
			t.Fatal("control: the gauge saw no writer beside another holder with writers taking RLock: it cannot see a breach")
		}
	})
}

func TestRLockReadersWriters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testReadersWriters(t, srv.Client(t), srv.Client(t))
	t.Run("Order", func(t *testing.T) { testRWOrder(t, srv.Client(t)) })
}

// On a Cluster and on Sentinel: the same exclusion, order, basics, loss,
// Shutdown and Close as on one server.
func TestRLockOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	testReadersWriters(t, cl.Client(t), cl.Client(t))
	t.Run("Order", func(t *testing.T) { testRWOrder(t, cl.Client(t)) })
	t.Run("Basics", func(t *testing.T) { testRLockBasics(t, cl.Client(t), cl.Client(t)) })
	t.Run("Lost", func(t *testing.T) { testRLockLost(t, cl.Client(t), cl.Client(t)) })
	t.Run("ShutdownAndClose", func(t *testing.T) { testRLockShutdownAndClose(t, cl.Client(t)) })
}

func TestRLockOnSentinel(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	testReadersWriters(t, sen.Client(t), sen.Client(t))
	t.Run("Order", func(t *testing.T) { testRWOrder(t, sen.Client(t)) })
	t.Run("Basics", func(t *testing.T) { testRLockBasics(t, sen.Client(t), sen.Master.Client(t)) })
	t.Run("Lost", func(t *testing.T) { testRLockLost(t, sen.Client(t), sen.Master.Client(t)) })
	t.Run("ShutdownAndClose", func(t *testing.T) { testRLockShutdownAndClose(t, sen.Client(t)) })
	// WithReplicaAck: a read lock is on the replica when RLock returns;
	// with the replica stopped, ErrNotReplicated within the budget and the
	// reader undone. Control: a Locker without the option takes a read
	// lock from the same master meanwhile.
	t.Run("ReplicaAck", func(t *testing.T) {
		acked := locktest.Locker(t, sen.Client(t), core.WithReplicaAck(1, 300*time.Millisecond))
		plain := locktest.Locker(t, sen.Client(t))
		master, replica := sen.Master.Client(t), sen.Replica.Client(t)
		ctx := locktest.Context(t)
		waitReplicaAcks(t, master)
		r, err := acked.RLock(ctx, "rw:ra")
		if err != nil {
			t.Fatal(err)
		}
		if n := readers(t, replica, "rw:ra"); n != 1 {
			t.Fatalf("%d readers on the replica right after RLock, want 1", n)
		}
		if err := sen.Replica.Pause(); err != nil {
			t.Fatal(err)
		}
		defer sen.Replica.Resume()
		start := time.Now()
		_, err = acked.RLock(ctx, "rw:ra", core.WithWait(500*time.Millisecond))
		if !errors.Is(err, core.ErrNotReplicated) {
			t.Fatalf("RLock with the replica stopped = %v, want ErrNotReplicated", err)
		}
		if d := time.Since(start); d > 600*time.Millisecond {
			t.Fatalf("it took %v, over its 500ms budget", d)
		}
		for i := 0; readers(t, master, "rw:ra") != 1; i++ {
			if i == 200 {
				t.Fatalf("%d readers on the master after the refused one, want the first only", readers(t, master, "rw:ra"))
			}
			time.Sleep(10 * time.Millisecond) // the undo runs in the background
		}
		pr, err := plain.RLock(ctx, "rw:ra", core.WithWait(core.NoWait))
		if err != nil {
			t.Fatalf("control: a Locker without WithReplicaAck = %v", err)
		}
		pr.Unlock(ctx)
		r.Unlock(ctx)
	})
}

// rwWaiter is a caller of testRWOrder, on a Locker of its own whose events
// tell when it waits.
type rwWaiter struct {
	name   string
	write  bool
	l      *core.Locker
	events *locktest.Events
}

// testRWOrder: readers and writers are served in the order they queued,
// and a writer is not overtaken. With a reader holding the lock, writer W1
// queues; a new reader is then busy (it would overtake W1), though readers
// share: the control, before W1 queued, is a second reader let in at once.
// Then readers R1 and R2, writer W2 and reader R3 queue: once the first
// reader leaves, W1 goes in, then R1 and R2 together (each waits inside
// for the other), then W2, then R3.
func testRWOrder(t *testing.T, c redis.UniversalClient) {
	ctx := locktest.Context(t)
	const name = "rw:order"
	holder := locktest.Locker(t, c)
	first, err := holder.RLock(ctx, name, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := holder.RLock(core.NewOwner(ctx), name, core.WithWait(core.NoWait))
	if err != nil {
		t.Fatalf("control: a second reader beside the first, no writer waiting = %v", err)
	}
	ctl.Unlock(ctx)

	var ws []*rwWaiter
	for _, n := range []string{"W1", "R1", "R2", "W2", "R3"} {
		e := &locktest.Events{}
		ws = append(ws, &rwWaiter{name: n, write: n[0] == 'W', l: locktest.Locker(t, c, core.WithObserver(e)), events: e})
	}
	var mu sync.Mutex
	var order []string
	both := make(chan struct{}) // R1 and R2 are inside together
	var inside sync.WaitGroup
	inside.Add(2)
	go func() { inside.Wait(); close(both) }()
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			take := w.l.RLock
			if w.write {
				take = w.l.Lock
			}
			s, err := take(ctx, name, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
				return
			}
			mu.Lock()
			order = append(order, w.name)
			mu.Unlock()
			if w.name == "R1" || w.name == "R2" {
				inside.Done()
				select {
				case <-both:
				case <-time.After(5 * time.Second):
					t.Errorf("%s: the other reader queued with it was not inside within 5s", w.name)
				}
			}
			s.Unlock(ctx)
		}()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, ok := w.events.Wait(wctx, locktest.Is(core.EventWaiting, name))
		cancel()
		if !ok {
			t.Fatalf("%s never waited", w.name)
		}
		if i == 0 {
			_, err := holder.RLock(core.NewOwner(ctx), name, core.WithWait(core.NoWait))
			var busy *core.BusyError
			if !errors.As(err, &busy) {
				t.Fatalf("a new reader while writer W1 waits = %v, want a *BusyError: it would overtake the writer", err)
			}
		}
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	got := strings.Join(order, " ")
	t.Logf("served: %s", got)
	if got != "W1 R1 R2 W2 R3" && got != "W1 R2 R1 W2 R3" {
		t.Fatalf("served in the order %q, want W1, then R1 and R2 together, then W2, then R3", got)
	}
}

// Re-entry: RLock in a read lease's context re-enters it (same fence, one
// more Unlock); RLock in a write lease's context re-enters the write hold;
// Lock in a read lease's context is refused at once with ErrInvalid (a
// read lock is not upgraded). Control: Lock of the name in a context of
// its own waits for the reader and is busy at its budget's end.
func TestRLockReentry(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	r, err := l.RLock(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	in, err := l.RLock(r.Context(), "re")
	if err != nil || !in.Reentrant() || in.Fence() != r.Fence() {
		t.Fatalf("RLock in a read lease's context = %v (reentrant %v, fence %d of %d), want a re-entry", err, in != nil && in.Reentrant(), in.Fence(), r.Fence())
	}
	if n := readers(t, direct, "re"); n != 1 {
		t.Fatalf("%d readers in Redis after a re-entry, want 1", n)
	}
	start := time.Now()
	_, err = l.Lock(r.Context(), "re")
	if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "not upgraded") {
		t.Fatalf("Lock in a read lease's context = %v, want ErrInvalid (not upgraded)", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("the refused upgrade took %v, want at once", d)
	}
	_, err = l.Lock(ctx, "re", core.WithWait(100*time.Millisecond))
	if !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("control: Lock in a context of its own while the reader holds = %v, want busy", err)
	}
	in.Unlock(ctx)
	if readers(t, direct, "re") != 1 {
		t.Fatal("the re-entry's Unlock released the reader's hold")
	}
	r.Unlock(ctx)

	w, err := l.Lock(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	rin, err := l.RLock(w.Context(), "re")
	if err != nil || !rin.Reentrant() || rin.Fence() != w.Fence() {
		t.Fatalf("RLock in a write lease's context = %v, want a re-entry of the write hold", err)
	}
	rin.Unlock(ctx)
	if !locktest.Held(t, ctx, direct, "re") {
		t.Fatal("the re-entry's Unlock released the writer's hold")
	}
}

// A read lock's acquire whose reply comes late runs again under the same
// owner: one reader in Redis, its fence the lease's; with a single attempt
// the call ends unavailable and the undo leaves no reader. Control: the
// same late reply makes a naive shared counter count twice (see
// TestSemaphoreLateAcquire's).
func TestRLockLateAcquire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	warm, err := l.RLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)

	t.Run("retried by a waiting call", func(t *testing.T) {
		acquire := rlockScript("acquire", "late")
		runs := p.Watch(acquire)
		p.HoldReply(acquire, lateReply)
		s, err := l.RLock(ctx, "late", core.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if n := runs.Count(); n < 2 {
			t.Fatalf("%d acquire scripts reached Redis, want 2 or more: the fault did not happen", n)
		}
		if n := readers(t, direct, "late"); n != 1 {
			t.Fatalf("%d readers after one RLock whose script ran %d times, want 1", n, runs.Count())
		}
		for k, v := range direct.HGetAll(ctx, locktest.RedisKey("late")).Val() {
			if f := strings.Split(v, "|"); len(k) > 1 && len(f) > 1 && f[1] != strconv.FormatInt(s.Fence(), 10) {
				t.Fatalf("fence in Redis %s, lease %d", f[1], s.Fence())
			}
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := readers(t, direct, "late"); n != 0 {
			t.Fatalf("%d readers after the only Unlock", n)
		}
	})

	t.Run("budget ends", func(t *testing.T) {
		acquire := rlockScript("acquire", "late2")
		runs := p.Watch(acquire)
		h := p.HoldReply(acquire, lateReply)
		_, err := l.RLock(ctx, "late2", core.WithWait(core.NoWait))
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("RLock whose reply came late = %v, want ErrUnavailable", err)
		}
		within(t, h.Answered(), 2*time.Second, "the held acquire ran")
		if n := runs.Count(); n != 1 {
			t.Fatalf("%d acquire scripts reached Redis, want one", n)
		}
		for i := 0; readers(t, direct, "late2") != 0; i++ {
			if i == 300 {
				t.Fatalf("%d readers still held after the undo, want 0", readers(t, direct, "late2"))
			}
			time.Sleep(10 * time.Millisecond) // the undo runs in the background
		}
		w, err := other.Lock(ctx, "late2", core.WithWait(core.NoWait))
		if err != nil {
			t.Fatalf("Lock after the undo = %v", err)
		}
		w.Unlock(ctx)
	})
}

// A reader's release whose reply is late runs twice and frees only its own
// hold: with two readers and a waiting writer, the writer stays busy while
// the other reader holds, and gets the lock when that one leaves.
// Control: the writer is granted once the other reader leaves too.
func TestRLockLateRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	var events locktest.Events
	writer, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	warm, err := l.RLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)

	s, err := l.RLock(ctx, "rel", core.WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := other.RLock(ctx, "rel")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		w, err := writer.Lock(ctx, "rel", core.WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, ok := events.Wait(wctx, locktest.Is(core.EventWaiting, "rel")); !ok {
		t.Fatal("the writer never waited")
	}
	release := rlockScript("release", "rel")
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
	if n := readers(t, direct, "rel"); n != 1 {
		t.Fatalf("%d readers after one reader's release ran %d times, want 1 (the other's)", n, runs.Count())
	}
	select {
	case <-got:
		t.Fatal("the writer got the lock while the other reader held it")
	default:
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w == nil {
			t.Fatal("the writer got no lock")
		}
		w.Unlock(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("control: the writer was not granted the lock once the last reader left")
	}
}

// A reader whose entry is deleted in Redis is lost at the next renewal,
// well before its TTL; the other reader of the same Locker and name stays
// held (the control: the renewal itself works).
func TestRLockLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testRLockLost(t, srv.Client(t), srv.Client(t))
}

func testRLockLost(t *testing.T, c, direct redis.UniversalClient) {
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	ttl := 3 * time.Second
	gone, err := l.RLock(ctx, "lost", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := l.RLock(ctx, "lost", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Unlock(ctx)
	owner := ""
	for k, v := range direct.HGetAll(ctx, locktest.RedisKey("lost")).Val() {
		if strings.HasSuffix(v, "|"+strconv.FormatInt(gone.Fence(), 10)) {
			owner = k
		}
	}
	if owner == "" {
		t.Fatal("the reader's entry is not in Redis")
	}
	start := time.Now()
	if err := direct.HDel(ctx, locktest.RedisKey("lost"), owner).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, gone.Done(), ttl/2+500*time.Millisecond, "loss noticed")
	if cause := context.Cause(gone.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	t.Logf("lost %v after its entry was deleted (TTL %v)", time.Since(start), ttl)
	if kept.Context().Err() != nil {
		t.Fatalf("the other reader's context ended too: %v", context.Cause(kept.Context()))
	}
	if d, err := kept.TTL(ctx); err != nil || d <= ttl/2 {
		t.Fatalf("the other reader after the batch that lost one: TTL %v, %v; want renewed", d, err)
	}
}

// A reader whose Locker is closed (Close leaves its holds to expire) holds
// the writer off until its TTL; one whose Locker shuts down (Shutdown
// releases) lets the writer in at once; its lease's context ends with
// ErrClosed either way.
func TestRLockShutdownAndClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testRLockShutdownAndClose(t, srv.Client(t))
}

func testRLockShutdownAndClose(t *testing.T, c redis.UniversalClient) {
	writer := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	for _, shutdown := range []bool{true, false} {
		name := fmt.Sprintf("sd:%v", shutdown)
		l := locktest.Locker(t, c)
		r, err := l.RLock(ctx, name, core.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if shutdown {
			if err := l.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			l.Close()
		}
		if cause := context.Cause(r.Context()); !errors.Is(cause, core.ErrClosed) {
			t.Fatalf("the reader's context after its Locker ended: %v, want ErrClosed", cause)
		}
		start := time.Now()
		w, err := writer.Lock(ctx, name, core.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		w.Unlock(ctx)
		t.Logf("shutdown %v: the writer waited %v", shutdown, took)
		if shutdown && took > time.Second {
			t.Fatalf("after Shutdown the writer waited %v, want the lock at once", took)
		}
		if !shutdown && took < time.Second {
			t.Fatalf("control: after Close the writer waited %v, less than the reader's remaining TTL", took)
		}
	}
}

// RLock on a Redlock Locker is refused at the call: its nodes could each
// admit different readers and writers.
func TestRLockRedlockUnsupported(t *testing.T) {
	t.Parallel()
	var cs []redis.UniversalClient
	for _, s := range redistest.StartN(t, 3) {
		cs = append(cs, s.Client(t))
	}
	rl, err := core.NewRedlock(cs)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	ctx := locktest.Context(t)
	if _, err := rl.RLock(ctx, "rl"); !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("RLock on a Redlock Locker = %v, want ErrUnsupported", err)
	}
	if n := cs[0].Exists(ctx, locktest.RedisKey("rl")).Val(); n != 0 {
		t.Fatal("the refused call left a hold")
	}
}

// Every event of a read lock says so (Read), and a lock's does not.
func TestRLockEventsSayRead(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var events locktest.Events
	l, _ := locktest.NewLocker(t, srv, core.WithObserver(&events))
	ctx := locktest.Context(t)
	r, err := l.RLock(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	r.Unlock(ctx)
	w, err := l.Lock(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	w.Unlock(ctx)
	var kinds []string
	for _, e := range events.All() {
		kinds = append(kinds, fmt.Sprintf("%v:%v", e.Kind, e.Read))
	}
	got := strings.Join(kinds, " ")
	want := fmt.Sprintf("%v:true %v:true %v:false %v:false", core.EventAcquired, core.EventReleased, core.EventAcquired, core.EventReleased)
	if got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}
