package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// budgetSlack is what the tests allow beyond a call's budget: the 50ms the
// Locker waits for a reply on its way, plus scheduling on a loaded machine
// under -race.
const budgetSlack = 500 * time.Millisecond

// defaultsClient is a client to srv with go-redis's default timeouts and
// retries (read timeout 5s, 3 retries): what the README's quick start uses.
func defaultsClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// pause stops srv (SIGSTOP) until the test ends or resume is called.
func pause(t *testing.T, srv *redistest.Server) (resume func()) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { srv.Resume() }) }
	t.Cleanup(resume)
	return resume
}

// A hung Redis is unavailable, never busy, and Lock returns within its
// budget whatever the client's timeouts (before: ErrNotObtained after 10s
// with a 200ms budget). The attempt left in flight is undone once Redis
// answers. Control: the same budget on a healthy Redis with the lock held
// gives ErrNotObtained. Both ways of bounding a call are attacked: a
// default client (the call runs on a goroutine the caller stops waiting
// for) and one with ContextTimeoutEnabled (go-redis bounds it itself).
func TestHungRedisWithinBudget(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"default", "ctxtimeout"} {
		t.Run("client="+kind, func(t *testing.T) { testHungRedisWithinBudget(t, kind) })
	}
}

func testHungRedisWithinBudget(t *testing.T, kind string) {
	srv := redistest.Start(t)
	c := defaultsClient(t, srv)
	if kind == "ctxtimeout" {
		c = redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
	}
	l := locktest.Locker(t, c)
	holder, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	t.Run("control: busy", func(t *testing.T) {
		s, err := holder.Lock(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unlock(ctx)
		_, err = l.Lock(ctx, "busy", core.WithWait(200*time.Millisecond))
		if !errors.Is(err, core.ErrNotObtained) || errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("held lock = %v, want ErrNotObtained", err)
		}
	})

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		opt  core.LockOption
		also error
	}{
		{"wait budget", func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, core.WithWait(200 * time.Millisecond), nil},
		{"request deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 200*time.Millisecond) }, core.WithWait(time.Minute), context.DeadlineExceeded},
		{"TryLock deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 200*time.Millisecond) }, core.WithWait(core.NoWait), context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := readCommands(t, direct)
			resume := pause(t, srv)
			cctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := l.Lock(cctx, "hung:"+tc.name, tc.opt)
			took := time.Since(start)
			t.Logf("Lock on a SIGSTOPped Redis, go-redis defaults, 200ms budget: %v after %v", err, took)
			if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("hung Redis = %v, want ErrUnavailable and not ErrNotObtained", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("err %v does not match %v", err, tc.also)
			}
			if took > 200*time.Millisecond+budgetSlack {
				t.Fatalf("Lock took %v with a 200ms budget", took)
			}
			resume()
			// The attempt reached Redis's socket and runs on resume (unless
			// the client was still dialing a new connection, whose
			// handshake the paused server never answered); the Locker
			// undoes it when go-redis returns. Nothing stays held, and
			// (probe) the attempt, if it ran (the acquire is the only
			// script that reads TIME on a free lock), was undone.
			key := "lockgate:{hung:" + tc.name + "}"
			for i := 0; ; i++ {
				after := readCommands(t, direct)
				ran := after.client["evalsha"] + after.client["eval"] - before.client["evalsha"] - before.client["eval"]
				acquired := after.client["time"] - before.client["time"]
				held := direct.Exists(ctx, key).Val() == 1
				if ran >= 1+acquired && ran >= 1 && !held {
					if acquired == 0 {
						t.Logf("the attempt never reached Redis (a new connection's handshake was pending); only its undo ran")
					}
					break
				}
				if i == 200 {
					t.Fatalf("10s after the pause: %d scripts ran, %d of them acquires (want each undone), %s held: %v", ran, acquired, key, held)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// A context already ended sends nothing, and its error is the context's
// (with the cause), not "busy".
func TestEndedContextSendsNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	hook := &countingHook{}
	c.AddHook(hook)
	l := locktest.Locker(t, c)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, lock := range []func(context.Context, string, ...core.LockOption) (*core.Lease, error){l.Lock, l.TryLock} {
		_, err := lock(cctx, "k")
		if !errors.Is(err, context.Canceled) || errors.Is(err, core.ErrNotObtained) || errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Lock with a cancelled context = %v, want context.Canceled only", err)
		}
	}
	if n := hook.n.Load(); n != 0 {
		t.Fatalf("%d commands sent for an ended context", n)
	}
}

// A Lock with the context of a lost lease reports the loss as the cause.
func TestLockWithLostLeaseContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "k", core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	direct.Del(ctx, "lockgate:{k}") // behind the holder's back: the next renewal finds it gone
	within(t, s.Done(), 2*time.Second, "lease lost")
	_, err = l.Lock(s.Context(), "other")
	if !errors.Is(err, core.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a lost lease's context = %v, want context.Canceled with cause ErrLockLost", err)
	}
}

// Waiters queued behind the head of a Locker report the holder's remaining
// time (before: 0, so Retry-After 1 and RetryInfo 0s while the lock was
// held for 28s more), and the retry hint is when the lock is likely free:
// the mean hold time this Locker has seen, not the holder's TTL.
func TestBusyErrorsTellTheHolder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, _ := locktest.NewLocker(t, srv)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)

	// Teach l that its locks are held for ~10ms.
	for i := 0; i < 5; i++ {
		s, err := l.Lock(ctx, "short")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the hold being measured
		s.Unlock(ctx)
	}

	held, err := holder.Lock(ctx, "k", core.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	const waiters = 4
	errs := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			_, err := l.Lock(ctx, "k", core.WithWait(400*time.Millisecond))
			errs <- err
		}()
	}
	for i := 0; i < waiters; i++ {
		err := <-errs
		var be *core.BusyError
		if !errors.As(err, &be) {
			t.Fatalf("waiter %d: %v, want a *BusyError", i, err)
		}
		if be.HolderTTL < 20*time.Second || be.HolderTTL > 30*time.Second {
			t.Fatalf("waiter %d: HolderTTL %v, want the holder's ~30s", i, be.HolderTTL)
		}
		if be.RetryAfter <= 0 || be.RetryAfter > time.Second {
			t.Fatalf("waiter %d: RetryAfter %v, want the ~10ms hold time seen, not the TTL", i, be.RetryAfter)
		}
		if n := core.RetryAfterSeconds(err); n != 1 {
			t.Fatalf("waiter %d: Retry-After %d, want 1", i, n)
		}
	}
}

// The attempt's outcome stays unknown for longer than the client's own
// timeouts: the acquire runs in Redis but its reply is held, the client
// gives up, and then the network refuses every connection for a second, so
// the first tries of the undo fail too. The undo is sent again until Redis
// answers, so nothing stays held for the TTL. The probe: the acquire held
// the lock in Redis while its caller was told ErrUnavailable.
func TestUndoOutlastsOutage(t *testing.T) {
	t.Parallel()
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) { testUndoOutlastsOutage(t, ctxTimeout) })
	}
}

func testUndoOutlastsOutage(t *testing.T, ctxTimeout bool) {
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: ctxTimeout})
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	_, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)
	h := p.HoldReply(script(t, "acquire", "outage"), 5*time.Second)
	got := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "outage", core.WithWait(time.Second), core.WithTTL(time.Minute))
		got <- err
	}()
	within(t, h.Matched(), time.Second, "the held acquire")
	p.SetRefuse(true) // cuts the connection waiting for the reply, and every undo
	if err := <-got; !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock whose reply never came = %v", err)
	}
	if n := direct.Exists(ctx, "lockgate:{outage}").Val(); n != 1 {
		t.Fatal("probe: the acquire holds nothing in Redis")
	}
	time.Sleep(time.Second) // the fault goes on: the undo's first tries fail
	if n := direct.Exists(ctx, "lockgate:{outage}").Val(); n != 1 {
		t.Fatal("probe: the undo got through a refusing network")
	}
	p.SetRefuse(false)
	waitGone(t, direct, "lockgate:{outage}")
}

// waitGone waits (bounded, 10s) until key no longer exists.
func waitGone(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		n, err := c.Exists(context.Background(), key).Result()
		if err == nil && n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s is still held: the abandoned attempt was not undone", key)
}

// A Locker's first calls each keep their own budget while the first one's
// server check (version, eviction policy) hangs: the others go on meanwhile
// (before, they waited for that check, and so for the first call's budget:
// on a hung Redis a 200ms Lock behind a 3s one took 2–3s; the fault rig's
// crowd found it). The check's INFO reply is held 2s by a proxy; a second
// Lock with a 1s budget (under the 2s hold; 200ms met a stall of a loaded
// make test), sent while it is held, gets its lock at once.
// Control: the first Lock itself waits out the held check.
func TestFirstCallsDoNotWaitForTheServerCheck(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	h := p.HoldReply(redistest.MatchCommand("info"), 2*time.Second)
	first := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		if s, err := l.Lock(ctx, "first", core.WithWait(3*time.Second)); err == nil {
			s.Unlock(ctx)
		}
		first <- time.Since(t0)
	}()
	within(t, h.Matched(), 2*time.Second, "the first call's server check")
	t0 := time.Now()
	s, err := l.Lock(ctx, "second", core.WithWait(time.Second))
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("the second Lock while the first one's check hangs = %v, want the lock", err)
	}
	s.Unlock(ctx)
	if took > 1500*time.Millisecond {
		t.Fatalf("the second Lock (1s budget) took %v behind the first one's check", took)
	}
	if d := <-first; d < 1500*time.Millisecond {
		t.Fatalf("control: the first Lock returned after %v, before its held check could have", d)
	}
}
