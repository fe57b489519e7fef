package grpclock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// TestGoodRuleControl is the control of TestStartupErrors: the setup its
// cases break, without the fault (a fail-open Go rule with a typed key,
// Wait core.NoWait, a TTL, Options, plus WithLockOptions and
// WithReleaseTimeout), is accepted and serves calls under the lock with the
// rule's settings.
func TestGoodRuleControl(t *testing.T) {
	e := newEnv(t,
		grpclock.WithLockOptions(core.WithTTL(5*time.Second), core.WithWatchdog()),
		grpclock.WithReleaseTimeout(2*time.Second),
		grpclock.WithRule(methodOrder, grpclock.Rule{
			Key:      "order:{user_id:int}:{voucher_id}",
			Wait:     core.NoWait,
			TTL:      time.Second, // wins over WithLockOptions' 5s
			FailOpen: true,
			Options:  []core.LockOption{core.WithReleaseTimeout(time.Second)},
		}),
	)
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "7", VoucherId: 3, PauseMs: -1})
		return err
	})
	k := e.lockKey("order:7:3")
	ttl, err := e.rdb.PTTL(ctx, k).Result()
	if err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("PTTL %s = %v, %v; want the rule's TTL, in (0, 1s]", k, ttl, err)
	}
	start := time.Now()
	_, err = e.client.Order(ctx, &testpb.OrderRequest{UserId: "7", VoucherId: 3})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call while held: %v, want ResourceExhausted", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("busy answer took %v: Wait core.NoWait should make one attempt", d)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if e.exists(t, k) {
		t.Fatalf("lock %s still held after the handler returned", k)
	}
}

// TestTypedFieldCanonical: with {user_id:int} on a string field, "01",
// "+1" and "1" are one user and lock one key (the second call is
// ResourceExhausted while the first is held); "2" is another key; "x" is
// InvalidArgument naming the field, and runs nothing.
func TestTypedFieldCanonical(t *testing.T) {
	e := newEnv(t, grpclock.WithRule(methodOrder, grpclock.Rule{Key: "order:{user_id:int}", Wait: core.NoWait}))
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "01", PauseMs: -1})
		return err
	})
	if !e.exists(t, e.lockKey("order:1")) {
		t.Fatalf("holder of \"01\" did not lock the canonical key %s (keys %v)", e.lockKey("order:1"), e.lockKeys(t))
	}
	for _, spelling := range []string{"1", "+1", "001"} {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: spelling})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("user_id %q while \"01\" is held: %v, want ResourceExhausted (one user, one lock)", spelling, err)
		}
	}
	// Control: another user is not blocked, so the busy answers above come
	// from the shared key.
	r, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "2"})
	if err != nil || r.GetKey() != "order:2" {
		t.Fatalf("user_id \"2\" = %v, %v; want key order:2", r, err)
	}
	_, err = e.client.Order(ctx, &testpb.OrderRequest{UserId: "x"})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "user_id") {
		t.Fatalf("user_id \"x\": %v, want InvalidArgument naming user_id", err)
	}
	if got := e.svc.calls.Load(); got != 2 {
		t.Fatalf("handler ran %d times, want 2 (the holder and user 2)", got)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if r, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "+1"}); err != nil || r.GetKey() != "order:1" {
		t.Fatalf("user_id \"+1\" after release = %v, %v; want key order:1", r, err)
	}
}

// TestClosedLockerNeverFailsOpen: a closed Locker is Unavailable ("shutting
// down") for a fail-open method too, and its handler does not run; the
// control with Redis merely stopped runs it (TestRedisDownUnavailable).
func TestClosedLockerNeverFailsOpen(t *testing.T) {
	e := newEnv(t, grpclock.WithRule(methodPlain, grpclock.Rule{Key: "plain:{user_id}", FailOpen: true}))
	ctx := testCtx(t)
	if err := e.locker.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, call := range []func() error{
		func() error { _, err := e.client.Relaxed(ctx, &testpb.OrderRequest{UserId: "u1"}); return err }, // annotation fail_open
		func() error { _, err := e.client.Plain(ctx, &testpb.OrderRequest{UserId: "u1"}); return err },   // Go rule FailOpen
	} {
		err := call()
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "shutting down") {
			t.Fatalf("fail-open call on a closed Locker: %v, want Unavailable \"shutting down\"", err)
		}
	}
	if got := e.svc.calls.Load(); got != 0 {
		t.Fatalf("handler ran %d times on a closed Locker, want 0", got)
	}
}

// TestRedisHungUnavailable: a Redis that hangs (SIGSTOP) under a client with
// go-redis's default timeouts and retries is Unavailable within the rule's
// 200ms wait plus a bound, never ResourceExhausted, and the handler does
// not run; a fail-open rule runs its handler without a lease within the
// same bound.
func TestRedisHungUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr}) // go-redis defaults: ReadTimeout 3s, MaxRetries 3
	t.Cleanup(func() { rdb.Close() })
	var logBuf locktest.SyncBuffer
	e := newEnvOn(t, newBaseOn(t, srv, rdb),
		grpclock.WithRule(methodOrder, grpclock.Rule{Key: "order:{user_id}", Wait: 200 * time.Millisecond}),
		grpclock.WithRule(methodRelaxed, grpclock.Rule{Key: "relaxed:{user_id}", Wait: 200 * time.Millisecond, FailOpen: true}),
		grpclock.WithLogger(slog.New(slog.NewTextHandler(&logBuf, nil))),
	)
	ctx := testCtx(t)
	// Warm up: a connection in the pool and the server check done.
	if _, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "warm"}); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Cleanup(func() { srv.Resume() }) // before the Locker closes (cleanups run last first)
	before := e.svc.calls.Load()

	start := time.Now()
	_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1"})
	took := time.Since(start)
	t.Logf("locked call on a hung Redis (Rule.Wait 200ms): %v after %v", status.Code(err), took)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("locked call on a hung Redis: %v, want Unavailable (not ResourceExhausted)", err)
	}
	if took >= 2*time.Second {
		t.Fatalf("Unavailable after %v, want within the 200ms wait plus a bound (< 2s)", took)
	}
	if got := e.svc.calls.Load(); got != before {
		t.Fatalf("handler ran on a hung Redis without fail-open")
	}

	start = time.Now()
	r, err := e.client.Relaxed(ctx, &testpb.OrderRequest{UserId: "u1"})
	took = time.Since(start)
	t.Logf("fail-open call on a hung Redis (Rule.Wait 200ms): %v after %v", status.Code(err), took)
	if err != nil || r.GetKey() != "" {
		t.Fatalf("fail-open call on a hung Redis = %v, %v; want the handler to run without a lease", r, err)
	}
	if took >= 2*time.Second {
		t.Fatalf("fail-open call took %v, want < 2s", took)
	}
	// The fail-open decision is logged with the rule's pattern, never the key.
	if log := logBuf.String(); !strings.Contains(log, "fail-open") || !strings.Contains(log, "pattern=relaxed:{user_id}") || strings.Contains(log, "relaxed:u1") {
		t.Fatalf("fail-open log should carry the pattern and never the key: %q", log)
	}
}

// TestDeadlineWhileBusyIsDeadlineExceeded: a unary call whose deadline
// passes while the lock is held elsewhere (Order waits up to 2s, the
// deadline is 200ms) is DeadlineExceeded, not ResourceExhausted.
//
//   - client deadline: the client reports DeadlineExceeded, and the server
//     (whose answer is read on its side, since the client reports its own
//     deadline whatever the server says) answers with the context's status,
//     Canceled or DeadlineExceeded depending on whether the client's
//     RST_STREAM or the server's own copy of the deadline comes first —
//     never ResourceExhausted;
//   - server-side deadline (the client allows 30s): the server's answer is
//     what the client sees, exactly DeadlineExceeded. This is the case where
//     core's wait timer for the deadline may fire before the context
//     reports it.
//
// Control: a call whose wait (Quick, 50ms) ends before its deadline is
// ResourceExhausted.
func TestDeadlineWhileBusyIsDeadlineExceeded(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	for range 3 {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := e.client.Order(short, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("client deadline: Order on a held key: %v, want DeadlineExceeded", err)
		}
		if err := e.servedErr(t, methodOrder); status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
			t.Fatalf("client deadline: the server answered %v, want the context's status (DeadlineExceeded or Canceled)", err)
		}

		sctx := metadata.AppendToOutgoingContext(ctx, "x-server-timeout", "200ms")
		start := time.Now()
		_, err = e.client.Order(sctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("server deadline: Order on a held key: %v after %v, want DeadlineExceeded", err, time.Since(start))
		}
		if err := e.servedErr(t, methodOrder); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("server deadline: the server answered %v, want DeadlineExceeded", err)
		}
	}

	_, err := e.client.Quick(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("control: Quick on a held key: %v, want ResourceExhausted", err)
	}
	if err := e.servedErr(t, methodQuick); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("control: server answered Quick with %v, want ResourceExhausted", err)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestReleaseAfterClientCancel: a client cancels a call while its handler
// holds the lock; the handler's context ends, and the release that follows,
// made with the call's already-cancelled context, still deletes the lock
// in Redis (read with a direct client), at once rather than after the TTL.
func TestReleaseAfterClientCancel(t *testing.T) {
	released := make(chan core.Event, 16)
	obs := core.ObserverFunc(func(_ context.Context, ev core.Event) {
		if ev.Kind == core.EventReleased {
			select {
			case released <- ev:
			default:
			}
		}
	})
	e := newEnvOn(t, newBase(t, core.WithObserver(obs)))
	callCtx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(callCtx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	k := e.lockKey("order:u1:7")
	if !e.exists(t, k) {
		t.Fatalf("lock %s not in Redis while the handler holds it", k)
	}
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v, want Canceled", err)
	}
	select {
	case cause := <-e.svc.causes:
		if !errors.Is(cause, context.Canceled) {
			t.Fatalf("handler ctx cause = %v, want context.Canceled", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end within 10s of the client's cancel")
	}
	select {
	case ev := <-released:
		if ev.Key != "order:u1:7" || ev.Err != nil {
			t.Fatalf("release event %+v, want order:u1:7 without error", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no release within 10s of the handler's end")
	}
	if e.exists(t, k) {
		ttl, _ := e.rdb.PTTL(context.Background(), k).Result()
		t.Fatalf("lock %s still in Redis (PTTL %v) after the release of a cancelled call", k, ttl)
	}
}
