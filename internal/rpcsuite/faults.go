package rpcsuite

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// testRedisDown: with Redis stopped, a locked call fails with Unavailable
// (with the answers of every Unavailable: checkUnavailable) and its
// handler never runs; a fail-open method runs without a lease; an
// unannotated method is unaffected. No Redis address or error text reaches
// the client.
func testRedisDown(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	// The control: with Redis up, the same call is served under its lock.
	if r := w.call(ctx, "Order", req("u0", 7, 0)); r.Code != OK || r.Key() != "order:u0:7" {
		t.Fatalf("control: Order with Redis up: %v", r)
	}
	w.Redis.Stop()

	r := w.call(ctx, "Order", req("u1", 7, 0))
	checkUnavailable(t, s, "Order with Redis down", r)
	if got := w.Service.Calls(); got != 1 {
		t.Fatalf("handler ran %d times with Redis down, want 0 (1 with the control)", got-1)
	}
	if r := w.call(ctx, "Relaxed", req("u1", 0, 0)); r.Code != OK || r.Key() != "" || r.Fence() != 0 {
		t.Fatalf("fail-open Relaxed with Redis down = %v; want the handler to run without a lease", r)
	}
	if r := w.call(ctx, "Plain", req("u1", 0, 0)); r.Code != OK {
		t.Fatalf("Plain with Redis down: %v", r)
	}
	if got := w.Service.Calls(); got != 3 {
		t.Fatalf("handler ran %d times, want 3 (the control, Relaxed, Plain)", got)
	}
}

// testClosedLocker: a closed Locker is Unavailable ("shutting down", with
// the answers of every Unavailable: checkUnavailable) for a fail-open
// method too (annotation fail_open and Go rule FailOpen), and
// its handler does not run; the control with Redis merely stopped runs it
// (testRedisDown).
func testClosedLocker(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) {
		sv.Rules = []Rule{{Method: "Plain", Key: "plain:{user_id}", FailOpen: true}}
	})
	ctx := testCtx(t)
	if err := w.Locker.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, method := range []string{"Relaxed", "Plain"} {
		r := w.call(ctx, method, req("u1", 0, 0))
		if r.Code != Unavailable || !strings.Contains(r.Message, "shutting down") {
			t.Fatalf("fail-open %s on a closed Locker: %v, want Unavailable \"shutting down\"", method, r)
		}
		checkUnavailable(t, s, "fail-open "+method+" on a closed Locker", r)
	}
	if got := w.Service.Calls(); got != 0 {
		t.Fatalf("handler ran %d times on a closed Locker, want 0", got)
	}
}

// testRedisHung: a Redis that hangs (SIGSTOP) under a client with
// go-redis's default timeouts and retries is Unavailable within the rule's
// 200ms wait plus a bound, never ResourceExhausted, and the handler does
// not run; a fail-open rule runs its handler without a lease within the
// same bound, and logs the rule's pattern, never the key.
func testRedisHung(t *testing.T, s Stack) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr}) // go-redis defaults: ReadTimeout 3s, MaxRetries 3
	t.Cleanup(func() { rdb.Close() })
	var logBuf locktest.SyncBuffer
	w := worldOn(s, NewEnvOn(t, "rpcsuite", srv, rdb)).serve(t, func(sv *Server) {
		sv.Rules = []Rule{
			{Method: "Order", Key: "order:{user_id}", Wait: 200 * time.Millisecond},
			{Method: "Relaxed", Key: "relaxed:{user_id}", Wait: 200 * time.Millisecond, FailOpen: true},
		}
		sv.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	})
	ctx := testCtx(t)
	// Warm up, and the control: a connection in the pool, the server check
	// done, the call served under its lock.
	if r := w.call(ctx, "Order", req("warm", 0, 0)); r.Code != OK || r.Key() != "order:warm" {
		t.Fatalf("warm-up call: %v", r)
	}
	if err := srv.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Cleanup(func() { srv.Resume() }) // before the Locker closes (cleanups run last first)
	before := w.Service.Calls()

	start := time.Now()
	r := w.call(ctx, "Order", req("u1", 0, 0))
	took := time.Since(start)
	t.Logf("locked call on a hung Redis (Rule.Wait 200ms): %v after %v", r.Code, took)
	if r.Code != Unavailable {
		t.Fatalf("locked call on a hung Redis: %v, want Unavailable (not ResourceExhausted)", r)
	}
	checkUnavailable(t, s, "locked call on a hung Redis", r)
	if took >= 2*time.Second {
		t.Fatalf("Unavailable after %v, want within the 200ms wait plus a bound (< 2s)", took)
	}
	if got := w.Service.Calls(); got != before {
		t.Fatal("handler ran on a hung Redis without fail-open")
	}

	start = time.Now()
	r = w.call(ctx, "Relaxed", req("u1", 0, 0))
	took = time.Since(start)
	t.Logf("fail-open call on a hung Redis (Rule.Wait 200ms): %v after %v", r.Code, took)
	if r.Code != OK || r.Key() != "" {
		t.Fatalf("fail-open call on a hung Redis = %v; want the handler to run without a lease", r)
	}
	if took >= 2*time.Second {
		t.Fatalf("fail-open call took %v, want < 2s", took)
	}
	if log := logBuf.String(); !strings.Contains(log, "fail-open") || !strings.Contains(log, "pattern=relaxed:{user_id}") || strings.Contains(log, "relaxed:u1") {
		t.Fatalf("fail-open log should carry the pattern and never the key: %q", log)
	}
}

// testDeadlineWhileBusy: a call whose deadline passes while the lock is
// held elsewhere (Order waits up to 2s, the deadline is 200ms) is
// DeadlineExceeded, not ResourceExhausted.
//
//   - client deadline: the client reports DeadlineExceeded, and the server
//     (whose answer is read on its side, since the client reports its own
//     deadline whatever the server says) answers with the context's code,
//     Canceled or DeadlineExceeded depending on whether the client's
//     cancellation or the server's own copy of the deadline comes first —
//     never ResourceExhausted;
//   - server-side deadline (ServerTimeoutHeader; the client allows 30s):
//     the server's answer is what the client sees, exactly
//     DeadlineExceeded. This is the case where core's wait timer for the
//     deadline may fire before the context reports it.
//
// Control: a call whose wait (Quick, 50ms) ends before its deadline is
// ResourceExhausted.
func testDeadlineWhileBusy(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", req("u1", 7, -1))
	for range 3 {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		r := w.call(short, "Order", req("u1", 7, 0))
		cancel()
		if r.Code != DeadlineExceeded {
			t.Fatalf("client deadline: Order on a held key: %v, want DeadlineExceeded", r)
		}
		if c := w.servedCode(t, "Order"); c != DeadlineExceeded && c != Canceled {
			t.Fatalf("client deadline: the server answered %v, want the context's code (DeadlineExceeded or Canceled)", c)
		}

		start := time.Now()
		r = w.call(ctx, "Order", req("u1", 7, 0), ServerTimeoutHeader, "200ms")
		if r.Code != DeadlineExceeded {
			t.Fatalf("server deadline: Order on a held key: %v after %v, want DeadlineExceeded", r, time.Since(start))
		}
		if c := w.servedCode(t, "Order"); c != DeadlineExceeded {
			t.Fatalf("server deadline: the server answered %v, want DeadlineExceeded", c)
		}
	}

	if r := w.call(ctx, "Quick", req("u1", 7, 0)); r.Code != ResourceExhausted {
		t.Fatalf("control: Quick on a held key: %v, want ResourceExhausted", r)
	}
	if c := w.servedCode(t, "Quick"); c != ResourceExhausted {
		t.Fatalf("control: the server answered Quick with %v, want ResourceExhausted", c)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
}

// testLockLost: when the lock is deleted behind the handler's back, the
// handler's context is cancelled with core.ErrLockLost (and the call ends
// Canceled, as the handler answers its context's end). The control: before
// the deletion the handler holds, its context alive.
func testLockLost(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) {
		sv.Rules = []Rule{{Method: "Order", Key: "order:{user_id}:{voucher_id}", TTL: 300 * time.Millisecond}}
	})
	ctx := testCtx(t)
	done := w.startHolder(t, ctx, "Order", req("u1", 7, -1))
	select {
	case r := <-done:
		t.Fatalf("control: the holder ended before its lock was deleted: %v", r)
	case c := <-w.Service.causes:
		t.Fatalf("control: the holder's context ended before its lock was deleted: %v", c)
	default:
	}
	if n, err := w.RDB.Del(ctx, w.LockKey("order:u1:7")).Result(); err != nil || n != 1 {
		t.Fatalf("DEL lock: %d, %v", n, err)
	}
	if cause := w.Service.Cause(t); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("handler ctx cause = %v, want core.ErrLockLost", cause)
	}
	if r := wait(t, done); r.Code != Canceled {
		t.Fatalf("call result %v, want Canceled from the handler", r)
	}
}

// testReleaseAfterCancel: a client cancels a call while its handler holds
// the lock; the handler's context ends, and the release that follows, made
// with the call's already-cancelled context, still deletes the lock in
// Redis (read with a direct client), at once rather than after the TTL.
func testReleaseAfterCancel(t *testing.T, s Stack) {
	var events locktest.Events
	w := newWorld(t, s, core.WithObserver(&events)).serve(t, nil)
	callCtx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := w.startHolder(t, callCtx, "Order", req("u1", 7, -1))
	k := w.LockKey("order:u1:7")
	if !w.Exists(t, k) {
		t.Fatalf("lock %s not in Redis while the handler holds it", k)
	}
	cancel()
	if r := wait(t, done); r.Code != Canceled {
		t.Fatalf("cancelled call: %v, want Canceled", r)
	}
	if cause := w.Service.Cause(t); !errors.Is(cause, context.Canceled) {
		t.Fatalf("handler ctx cause = %v, want context.Canceled", cause)
	}
	wctx, wcancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer wcancel()
	ev, ok := events.Wait(wctx, locktest.Is(core.EventReleased, "order:u1:7"))
	if !ok {
		t.Fatal("no release within 10s of the handler's end")
	}
	if ev.Err != nil {
		t.Fatalf("release event %+v, want one without error", ev)
	}
	if w.Exists(t, k) {
		ttl, _ := w.RDB.PTTL(context.Background(), k).Result()
		t.Fatalf("lock %s still in Redis (PTTL %v) after the release of a cancelled call", k, ttl)
	}
}

// testPanicReleases: a handler that panics under its lock (the stack's
// recovery answers Internal) has its lock released when the panic passes
// the interceptor, at once: the next call of the same key (Quick, 50ms
// wait) is served. The control: while the panicking handler ran, its lock
// was in Redis.
func testPanicReleases(t *testing.T, s Stack) {
	w := newWorld(t, s)
	k := w.LockKey("order:u1:7")
	heldDuring := make(chan bool, 1)
	// pause_ms -2 panics, after OnPanic looked the lock up in Redis.
	w.Service.OnPanic = func(context.Context) {
		n, err := w.RDB.Exists(context.Background(), k).Result()
		heldDuring <- err == nil && n == 1
	}
	w.serve(t, nil)
	ctx := testCtx(t)
	r := w.call(ctx, "Order", req("u1", 7, -2))
	if r.Code != Internal {
		t.Fatalf("panicking call: %v, want Internal (the stack's recovery)", r)
	}
	select {
	case held := <-heldDuring:
		if !held {
			t.Fatalf("control: lock %s not in Redis while the handler ran", k)
		}
	default:
		t.Fatal("the panicking handler did not run")
	}
	if w.Exists(t, k) {
		t.Fatalf("lock %s still in Redis after the handler panicked", k)
	}
	if r := w.call(ctx, "Quick", req("u1", 7, 0)); r.Code != OK {
		t.Fatalf("Quick after the panic: %v, want OK (the lock released)", r)
	}
}
