package fiberlock_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// TestFailOpenOnlyWhenUnavailable: fail-open runs the handler without the
// lock for an unavailable Redis only. A closed Locker (core.ErrClosed)
// answers 503 and does not run the handler, FailOpen or not; the control
// is the same route on a live Locker, which serves under the lock.
func TestFailOpenOnlyWhenUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	var logBuf locktest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	var ran, leased atomic.Int32
	h := func(c *fiber.Ctx) error {
		ran.Add(1)
		if fiberlock.FromContext(c) != nil {
			leased.Add(1)
		}
		return nil
	}
	live := newLocker(t, srv)
	closed := newLocker(t, srv)
	closed.Close()
	f := newApp()
	f.Post("/live/:voucher", fiberlock.New(fiberlock.Config{Locker: live, Key: "order:{path.voucher}", FailOpen: true, Logger: logger}), h)
	f.Post("/closed/:voucher", fiberlock.New(fiberlock.Config{Locker: closed, Key: "order:{path.voucher}", FailOpen: true, Logger: logger}), h)
	a := start(t, f)
	ctx := locktest.Context(t)

	if r := a.do(ctx, "POST", "/live/7", "", ""); r.Err != nil || r.Status != 200 || ran.Load() != 1 || leased.Load() != 1 {
		t.Fatalf("control: %d %v, ran %d, under a lease %d; want 200 under the lock", r.Status, r.Err, ran.Load(), leased.Load())
	}
	r := a.do(ctx, "POST", "/closed/7", "", "")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed Locker with FailOpen: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if ran.Load() != 1 {
		t.Fatal("the handler ran without the lock on a closed Locker (fail-open must not apply)")
	}
	if logs := logBuf.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "locker closed") || strings.Contains(logs, "fail-open") {
		t.Fatalf("log %q, want the closed Locker at error and no fail-open", logs)
	}
}

// TestContextOutcomes: a user context (set by earlier middleware) that
// ended before the lock answers for the request: a passed deadline is 503
// saying so, a cancellation 499, a cancellation whose cause is lockgate's
// (a lost lease) 503 — never 429, never the handler, FailOpen on.
func TestContextOutcomes(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	contexts := map[string]func() context.Context{
		"deadline": func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		},
		"cancelled": func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		},
		"lost": func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(core.ErrLockLost)
			return ctx
		},
		"live": context.Background,
	}
	f := newApp()
	f.Use(func(c *fiber.Ctx) error { // a timeout middleware, say
		if mk := contexts[c.Query("ctx")]; mk != nil {
			c.SetUserContext(mk())
		}
		return c.Next()
	})
	f.Post("/o/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", FailOpen: true,
		Logger: slog.New(slog.DiscardHandler)}), func(c *fiber.Ctx) error { ran.Add(1); return nil })
	a := start(t, f)
	ctx := locktest.Context(t)
	cases := []struct {
		ctx    string
		status int
		text   string
	}{
		{"deadline", http.StatusServiceUnavailable, "the request's deadline passed while waiting for the lock"},
		{"cancelled", fiberlock.StatusClientClosedRequest, "client closed request"},
		{"lost", http.StatusServiceUnavailable, "lock service unavailable"},
		{"live", http.StatusOK, ""},
	}
	for _, c := range cases {
		t.Run(c.ctx, func(t *testing.T) {
			before := ran.Load()
			r := a.do(ctx, "POST", "/o/7?ctx="+c.ctx, "", "")
			if r.Err != nil || r.Status != c.status {
				t.Fatalf("status %d %v %s, want %d", r.Status, r.Err, r.Body, c.status)
			}
			if c.status == http.StatusOK {
				if ran.Load() != before+1 {
					t.Fatal("control: the handler did not run")
				}
				return
			}
			if msg := locktest.ErrorText(t, r.Body); msg != c.text {
				t.Fatalf("text %q, want %q", msg, c.text)
			}
			if ran.Load() != before {
				t.Fatal("the handler ran")
			}
		})
	}
}

// TestReleaseAfterCancelledContext: the user context is cancelled while
// the handler runs; the release still deletes the lock key in Redis before
// the answer is sent. The control: the key exists while the handler runs,
// after the cancellation.
func TestReleaseAfterCancelledContext(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	rc := srv.Client(t)
	var logBuf locktest.SyncBuffer
	var heldInside atomic.Int32
	f := newApp()
	f.Use(func(c *fiber.Ctx) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c.SetUserContext(ctx)
		c.Locals("cancel", cancel)
		return c.Next()
	})
	f.Post("/o/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}),
		func(c *fiber.Ctx) error {
			c.Locals("cancel").(context.CancelFunc)()
			<-c.UserContext().Done() // the lease's context, derived from the cancelled one
			if n, err := rc.Exists(context.Background(), locktest.RedisKey("order:7")).Result(); err == nil {
				heldInside.Store(int32(n))
			}
			return nil
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	if r := a.do(ctx, "POST", "/o/7", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
	}
	if heldInside.Load() != 1 {
		t.Fatal("control: the lock key did not exist while the handler ran")
	}
	if locktest.Held(t, ctx, rc, "order:7") {
		t.Fatal("the lock key still exists after the handler of a cancelled context returned")
	}
	if logs := logBuf.String(); strings.Contains(logs, "release failed") {
		t.Fatalf("release logged as failed: %q", logs)
	}
}

// TestRedisHung: Redis paused (SIGSTOP: connections open, no answer) with
// Wait 200ms answers 503 within the budget plus a bound — not 429, and not
// after the client's timeouts — and with FailOpen runs the handler without
// the lock.
func TestRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	h := func(c *fiber.Ctx) error { ran.Add(1); return nil }
	quiet := slog.New(slog.DiscardHandler)
	f := newApp()
	f.Post("/closed/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Wait: 200 * time.Millisecond, Logger: quiet}), h)
	f.Post("/open/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Wait: 200 * time.Millisecond, FailOpen: true, Logger: quiet}), h)
	a := start(t, f)
	ctx := locktest.Context(t)
	// Warm up: the server check and a connection are done before the pause.
	if r := a.do(ctx, "POST", "/closed/1", "", ""); r.Status != 200 {
		t.Fatalf("warm-up: %d %v %s", r.Status, r.Err, r.Body)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Resume() }) // before the Locker closes (cleanups run last first)

	start := time.Now()
	r := a.do(ctx, "POST", "/closed/7", "", "")
	took := time.Since(start)
	t.Logf("hung Redis, wait 200ms: %d after %v", r.Status, took)
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("hung Redis: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("answered after %v, want within the 200ms budget plus a bound (< 2s)", took)
	}
	start = time.Now()
	r = a.do(ctx, "POST", "/open/8", "", "")
	took = time.Since(start)
	t.Logf("hung Redis, wait 200ms, FailOpen: %d after %v", r.Status, took)
	if r.Err != nil || r.Status != http.StatusOK || ran.Load() != 2 || took > 2*time.Second {
		t.Fatalf("hung Redis, FailOpen: %d %v after %v, ran %d; want 200 without the lock", r.Status, r.Err, took, ran.Load())
	}
}

// TestTypedPlaceholders: {query.user_id:int} and {path.voucher:uint} lock
// the canonical value, so user 01 / voucher 007 and user 1 / voucher 7 are
// one lock (the second is busy while the first is held), another user is
// not blocked (the control), and a value that does not parse is a 400
// naming the field.
func TestTypedPlaceholders(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	inside := make(chan string, 1)
	leave := make(chan struct{})
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id:int}:{path.voucher:uint}", Wait: core.NoWait}),
		func(c *fiber.Ctx) error {
			key := fiberlock.FromContext(c).Key()
			if c.Query("hold") != "" {
				inside <- key
				<-leave
			}
			return c.SendString(key)
		})
	a := start(t, f)
	release := sync.OnceFunc(func() { close(leave) })
	t.Cleanup(release) // before the app's shutdown, which waits for the handler
	ctx := locktest.Context(t)

	first := make(chan locktest.Result, 1)
	go func() { first <- a.do(ctx, "POST", "/seckill/007?user_id=01&hold=1", "", "") }()
	var key string
	select {
	case key = <-inside:
	case r := <-first:
		t.Fatalf("first request: %d %v %s", r.Status, r.Err, r.Body)
	}
	if key != "order:1:7" {
		t.Fatalf("key %q, want order:1:7", key)
	}
	for _, q := range []string{"/seckill/7?user_id=1", "/seckill/7?user_id=%2B1", "/seckill/0007?user_id=001"} {
		if r := a.do(ctx, "POST", q, "", ""); r.Err != nil || r.Status != http.StatusTooManyRequests {
			t.Errorf("%s while order:1:7 is held: %d %v %s, want 429", q, r.Status, r.Err, r.Body)
		}
	}
	if r := a.do(ctx, "POST", "/seckill/7?user_id=02", "", ""); r.Err != nil || r.Status != 200 || r.Body != "order:2:7" {
		t.Errorf("control, another user: %d %v %q, want 200 under order:2:7", r.Status, r.Err, r.Body)
	}
	for _, c := range []struct{ q, part string }{
		{"/seckill/7?user_id=x", "query.user_id"},
		{"/seckill/7?user_id=1.0", "query.user_id"},
		{"/seckill/-7?user_id=1", "path.voucher"},
	} {
		r := a.do(ctx, "POST", c.q, "", "")
		if r.Err != nil || r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %v %s, want 400", c.q, r.Status, r.Err, r.Body)
			continue
		}
		if msg := locktest.ErrorText(t, r.Body); !strings.HasPrefix(msg, c.part+": invalid value") {
			t.Errorf("%s: text %q, want it to start with %q", c.q, msg, c.part+": invalid value")
		}
	}
	release()
	if r := <-first; r.Err != nil || r.Status != 200 || r.Body != "order:1:7" {
		t.Fatalf("first request: %d %v %q", r.Status, r.Err, r.Body)
	}
}
