package httpsuite

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// waitDone waits for ctx to end within bound and returns its cause, or an
// error saying it did not end.
func waitDone(ctx context.Context) error {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
		return errors.New("the handler's ctx was not cancelled within the bound")
	}
}

// lockLost: the lock key deleted in Redis behind a running handler's back
// → the handler's ctx is cancelled with cause core.ErrLockLost (the 1s
// TTL's renewal notices). The control: before the deletion the ctx
// outlives the TTL, renewed three times.
func lockLost(t *testing.T, s Stack) {
	e := newEnv(t, s)
	var ev locktest.Events
	l := e.locker(core.WithObserver(&ev))
	inside := make(chan string, 1)
	causes := make(chan error, 1)
	h := func(ctx context.Context, lease *core.Lease, _ Request) (int, string) {
		inside <- lease.Key()
		causes <- waitDone(ctx)
		return http.StatusOK, "done"
	}
	base := e.serve(Route{Method: "POST", Path: seckillPath, Locker: l, Key: "order:{path.voucher}",
		Options: Options{TTL: time.Second, Logger: quiet()}, Handler: h})
	done := make(chan locktest.Result, 1)
	go func() { done <- e.post(base + "/seckill/7") }()
	key := recv(t, inside, "the handler")

	renewals := 0
	if _, ok := ev.Wait(e.waitCtx(), func(x core.Event) bool {
		if x.Kind == core.EventRenewed && x.Key == key && x.Err == nil {
			renewals++
		}
		return renewals == 3
	}); !ok {
		t.Fatalf("control: %d renewals of the running handler's lock, want 3", renewals)
	}
	select {
	case cause := <-causes:
		t.Fatalf("control: the handler's ctx ended (%v) while its lock was renewed", cause)
	default:
	}

	if err := e.rdb.Del(e.ctx, locktest.RedisKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, causes, "the handler's ctx"); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want core.ErrLockLost", cause)
	}
	if r := recv(t, done, "the answer"); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// panicReleases: a handler that panics (the framework's recovery answers
// 500 or drops the connection) has its lock released by the time the
// client sees that: the key is gone from Redis and the next request
// obtains it with no wait at all.
func panicReleases(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	var calls atomic.Int32
	h := func(context.Context, *core.Lease, Request) (int, string) {
		if calls.Add(1) == 1 {
			panic("boom in handler")
		}
		return http.StatusOK, "ok"
	}
	base := e.serve(Route{Method: "POST", Path: seckillPath, Locker: l, Key: seckillKey, Options: Options{Wait: core.NoWait, Logger: quiet()}, Handler: h})
	if r := e.post(base + "/seckill/7?user_id=1"); r.Err == nil && r.Status != http.StatusInternalServerError {
		t.Fatalf("panicking request answered %d %s, want 500 or the connection dropped", r.Status, r.Body)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want once", calls.Load())
	}
	if e.held("order:1:7") {
		t.Fatal("lock key still exists after the panic")
	}
	if r := e.post(base + "/seckill/7?user_id=1"); r.Err != nil || r.Status != 200 {
		t.Fatalf("next request: %d %v %s, want 200 at once", r.Status, r.Err, r.Body)
	}
}

// releaseAfterCancel: the request's context is cancelled while the
// handler runs — the client hangs up, or an earlier middleware cancels
// it — and the release still deletes the lock key in Redis, without a
// failed release logged. The control: the key exists inside the handler,
// after the cancellation.
func releaseAfterCancel(t *testing.T, s Stack) {
	t.Run("client hangs up", func(t *testing.T) {
		if s.NoClientCancel {
			t.Skip("the framework does not cancel the request's context when the client goes away (NoClientCancel)")
		}
		e := newEnv(t, s)
		var ev locktest.Events
		var logBuf locktest.SyncBuffer
		l := e.locker(core.WithObserver(&ev))
		entered := make(chan struct{}, 1)
		heldInside := make(chan bool, 1)
		h := func(ctx context.Context, _ *core.Lease, _ Request) (int, string) {
			entered <- struct{}{}
			err := waitDone(ctx)
			heldInside <- e.inRedis("order:7") && errors.Is(err, context.Canceled)
			return http.StatusOK, "ok"
		}
		base := e.serve(Route{Method: "POST", Path: "/o/{voucher}", Locker: l, Key: "order:{path.voucher}", Options: Options{Logger: textLogger(&logBuf)}, Handler: h})
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		gone := make(chan locktest.Result, 1)
		go func() { gone <- locktest.Do(ctx, e.client, "POST", base+"/o/7", "", "") }()
		recv(t, entered, "the handler")
		cancel()
		if r := recv(t, gone, "the cancelled request"); r.Err == nil {
			t.Fatalf("the cancelled request was answered %d %s", r.Status, r.Body)
		}
		if !recv(t, heldInside, "the handler's check") {
			t.Fatal("control: the handler's ctx did not end with the hang-up, or the lock key did not exist after it")
		}
		rel, ok := ev.Wait(e.waitCtx(), locktest.Is(core.EventReleased, "order:7"))
		if !ok {
			t.Fatal("no release after the handler of a cancelled request")
		}
		if rel.Err != nil {
			t.Fatalf("release: %v", rel.Err)
		}
		if e.held("order:7") {
			t.Fatal("the lock key still exists after the release")
		}
		if logs := logBuf.String(); strings.Contains(logs, "release failed") {
			t.Fatalf("release logged as failed: %q", logs)
		}
	})
	t.Run("context cancelled", func(t *testing.T) {
		if s.NoRequestContext {
			t.Skip("the stack cannot set the request's context (NoRequestContext)")
		}
		e := newEnv(t, s)
		var logBuf locktest.SyncBuffer
		l := e.locker()
		cancels := make(chan context.CancelFunc, 1)
		withCancel := func(parent context.Context) context.Context {
			ctx, cancel := context.WithCancel(parent)
			select {
			case cancels <- cancel:
			default:
				cancel()
			}
			return ctx
		}
		heldInside := make(chan bool, 1)
		h := func(ctx context.Context, _ *core.Lease, _ Request) (int, string) {
			select {
			case cancel := <-cancels:
				cancel()
			default:
				return http.StatusInternalServerError, "no cancel func"
			}
			err := waitDone(ctx) // the lease's context, derived from the cancelled one
			heldInside <- e.inRedis("order:7") && errors.Is(err, context.Canceled)
			return http.StatusOK, "ok"
		}
		base := e.serve(Route{Method: "POST", Path: "/o/{voucher}", Locker: l, Key: "order:{path.voucher}",
			Options: Options{Logger: textLogger(&logBuf)}, Context: withCancel, Handler: h})
		if r := e.post(base + "/o/7"); r.Err != nil || r.Status != 200 {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if !recv(t, heldInside, "the handler's check") {
			t.Fatal("control: the handler's ctx did not end with the cancellation, or the lock key did not exist after it")
		}
		if e.held("order:7") {
			t.Fatal("the lock key still exists after the answer to a request whose context was cancelled")
		}
		if logs := logBuf.String(); strings.Contains(logs, "release failed") {
			t.Fatalf("release logged as failed: %q", logs)
		}
	})
}
