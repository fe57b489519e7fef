package fiberlock_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// TestBadInput: key errors → 400 naming the part, body over MaxBodySize →
// 413; the handler does not run and nothing is locked. Then the JSON and
// form bodies are intact for the handler.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	echo := func(c *fiber.Ctx) error {
		ran.Add(1)
		if c.Path() == "/form" {
			return c.SendString(c.FormValue("sku") + "|" + c.FormValue("n"))
		}
		return c.Send(c.Body())
	}
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}"}), echo)
	f.Post("/body", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{body.user.id}", MaxBodySize: 1024}), echo)
	f.Post("/form", fiberlock.New(fiberlock.Config{Locker: l, Key: "sku:{form.sku}"}), echo)
	f.Post("/header", fiberlock.New(fiberlock.Config{Locker: l, Key: "u:{header.X-User-ID}"}), echo)
	a := start(t, f)
	ctx := locktest.Context(t)
	const jsonCT = "application/json"
	bad := []struct {
		name, path, ctype, body string
		status                  int
		part, reason            string
	}{
		{"missing query", "/seckill/7", "", "", 400, "query.user_id", "missing"},
		{"empty query", "/seckill/7?user_id=", "", "", 400, "query.user_id", "missing"},
		{"oversized value", "/seckill/7?user_id=" + strings.Repeat("9", keyfunc.DefaultMaxValueLen+1), "", "", 400, "query.user_id", "too long"},
		{"control character", "/seckill/7?user_id=a%0Ab", "", "", 400, "query.user_id", "invalid value"},
		{"missing body field", "/body", jsonCT, `{"user":{}}`, 400, "body.user.id", "missing"},
		{"body not JSON", "/body", jsonCT, `{"user":`, 400, "body.user.id", "invalid value"},
		{"oversized body", "/body", jsonCT, `{"user":{"id":1},"pad":"` + strings.Repeat("x", 2048) + `"}`, 413, "", "too large"},
		{"missing form field", "/form", "application/x-www-form-urlencoded", "n=1", 400, "form.sku", "missing"},
		{"missing header", "/header", "", "", 400, "header.X-User-ID", "missing"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := a.do(ctx, "POST", c.path, c.ctype, c.body)
			if r.Err != nil || r.Status != c.status {
				t.Fatalf("status %d (%v), want %d: %s", r.Status, r.Err, c.status, r.Body)
			}
			msg := locktest.ErrorText(t, r.Body)
			if !strings.Contains(msg, c.part) || !strings.Contains(msg, c.reason) {
				t.Fatalf("error %q, want it to name %q and %q", msg, c.part, c.reason)
			}
			if strings.Contains(msg, "keyfunc") {
				t.Fatalf("error %q carries the package name", msg)
			}
		})
	}
	if ran.Load() != 0 {
		t.Fatalf("handler ran %d times on bad input", ran.Load())
	}
	if n, err := srv.Client(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("redis holds %d keys after bad input (%v), want 0", n, err)
	}
	t.Run("JSON body intact", func(t *testing.T) {
		body := `{"user": {"id": 42, "name": "Zoë"}, "qty": 1.50}`
		if r := a.do(ctx, "POST", "/body", jsonCT, body); r.Err != nil || r.Status != 200 || r.Body != body {
			t.Fatalf("got %d %v %q, want the body echoed", r.Status, r.Err, r.Body)
		}
	})
	t.Run("form body intact", func(t *testing.T) {
		form := url.Values{"sku": {"a:b"}, "n": {"3"}}.Encode()
		if r := a.do(ctx, "POST", "/form", "application/x-www-form-urlencoded", form); r.Err != nil || r.Status != 200 || r.Body != "a:b|3" {
			t.Fatalf("got %d %v %q", r.Status, r.Err, r.Body)
		}
	})
}

// TestLeaseInHandler: FromContext(c) returns the lease, c.UserContext() is its
// Context (nested locking re-enters), {ctx.user} reads c.Locals set by
// earlier middleware, and the user context is restored afterwards.
func TestLeaseInHandler(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	type seen struct {
		key             string
		fence           int64
		same, reentered bool
		after           bool // the user context after the middleware is live again
		err             error
	}
	got := make(chan seen, 1)
	f := newApp()
	f.Use(func(c *fiber.Ctx) error { // an auth middleware
		c.Locals("user", 42)
		var s seen
		err := c.Next()
		s = <-got
		s.after = c.UserContext().Err() == nil && fiberlock.FromContext(c) == nil
		got <- s
		return err
	})
	f.Post("/v/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{ctx.user}:{voucher}"}), func(c *fiber.Ctx) error {
		lease := fiberlock.FromContext(c)
		s := seen{key: lease.Key(), fence: lease.Fence(), same: c.UserContext() == lease.Context()}
		inner, err := l.Lock(c.UserContext(), lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			s.reentered = inner.Reentrant()
			err = inner.Unlock(c.UserContext())
		}
		s.err = err
		got <- s
		return nil
	})
	a := start(t, f)
	if r := a.do(locktest.Context(t), "POST", "/v/a:b", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
	}
	s := <-got
	if s.key != "order:42:a%3Ab" || s.fence <= 0 || !s.same || !s.reentered || s.err != nil || !s.after {
		t.Fatalf("handler saw %+v", s)
	}
}

// TestNextSkips: Config.Next skips the middleware.
func TestNextSkips(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	f := newApp()
	f.Post("/x", fiberlock.New(fiberlock.Config{Locker: l, Key: "x:{query.id}", Next: func(c *fiber.Ctx) bool { return c.Get("X-Skip") != "" }}),
		func(c *fiber.Ctx) error {
			return c.SendString(strings.Repeat("L", boolInt(fiberlock.FromContext(c) != nil)))
		})
	a := start(t, f)
	req, _ := http.NewRequestWithContext(locktest.Context(t), "POST", a.URL+"/x", nil) // no id: would be 400
	req.Header.Set("X-Skip", "1")
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("skipped request: %d", resp.StatusCode)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBusy: 429 with Retry-After = core.RetryAfterSeconds of the busy
// error — the estimate of when the lock is likely free (this Locker's mean
// hold time, here ~1.1s → 2), not the holder's 30s TTL — and the
// LimitReached override, which sees the header already set.
func TestBusy(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	ctx := locktest.Context(t)
	// One hold of ~1.1s teaches the Locker its hold time.
	first, err := l.Lock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the hold being measured, not a synchronisation
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := l.Lock(ctx, "order:1:7") // default TTL 30s
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	_, busyErr := l.TryLock(ctx, "order:1:7")
	want := strconv.Itoa(core.RetryAfterSeconds(busyErr))
	if !errors.Is(busyErr, core.ErrNotObtained) || want != "2" {
		t.Fatalf("direct TryLock: %v, Retry-After %s, want busy and 2", busyErr, want)
	}

	var ran atomic.Int32
	h := func(c *fiber.Ctx) error { ran.Add(1); return nil }
	f := newApp()
	key := "order:{query.user_id}:{path.voucher}"
	f.Post("/a/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: key, Wait: core.NoWait}), h)
	f.Post("/b/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: key, Wait: 20 * time.Millisecond,
		LimitReached: func(c *fiber.Ctx) error {
			c.Set("X-Seen-Retry-After", string(c.Response().Header.Peek("Retry-After")))
			return c.SendStatus(fiber.StatusConflict)
		}}), h)
	a := start(t, f)
	r := a.do(ctx, "POST", "/a/7?user_id=1", "", "")
	if r.Status != http.StatusTooManyRequests || r.RetryAfter != want {
		t.Fatalf("got %d Retry-After %q, want 429 and %s", r.Status, r.RetryAfter, want)
	}
	if msg := locktest.ErrorText(t, r.Body); !strings.Contains(msg, "busy") {
		t.Fatalf("busy text %q", msg)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/b/7?user_id=1", nil)
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("X-Seen-Retry-After") != want {
		t.Fatalf("override: %d, Retry-After seen %q, want %s", resp.StatusCode, resp.Header.Get("X-Seen-Retry-After"), want)
	}
	if ran.Load() != 0 {
		t.Fatal("handler ran while the lock was busy")
	}
}

// TestPanicAndErrorRelease: a handler that panics (recovered by Fiber's
// recover middleware: 500) or returns an error (Fiber's error handler) has
// its lock released: the next request obtains it with no wait at all.
func TestPanicAndErrorRelease(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var calls atomic.Int32
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}", Wait: core.NoWait}),
		func(c *fiber.Ctx) error {
			switch calls.Add(1) {
			case 1:
				panic("boom in handler")
			case 2:
				return fiber.NewError(fiber.StatusTeapot, "handler error")
			}
			return nil
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	rc := srv.Client(t)
	for i, want := range []int{http.StatusInternalServerError, http.StatusTeapot, http.StatusOK} {
		r := a.do(ctx, "POST", "/seckill/7?user_id=1", "", "")
		if r.Err != nil || r.Status != want {
			t.Fatalf("request %d: %d %v %s, want %d", i, r.Status, r.Err, r.Body, want)
		}
		if locktest.Held(t, ctx, rc, "order:1:7") {
			t.Fatalf("request %d: lock key still exists", i)
		}
	}
	if r := a.do(ctx, "POST", "/seckill/7?user_id=1", "", ""); r.Status != 200 || calls.Load() != 4 {
		t.Fatalf("after: %d, calls %d", r.Status, calls.Load())
	}
}

// TestRedisDown: Redis stopped → 503 and the handler does not run; with
// FailOpen the handler runs without a lease and a warning is logged.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	var leaseSeen atomic.Bool
	h := func(c *fiber.Ctx) error {
		ran.Add(1)
		leaseSeen.Store(fiberlock.FromContext(c) != nil)
		return nil
	}
	var logBuf locktest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	f := newApp()
	f.Post("/closed/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Logger: logger}), h)
	f.Post("/open/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Logger: logger, FailOpen: true}), h)
	a := start(t, f)
	ctx := locktest.Context(t)
	srv.Stop()
	r := a.do(ctx, "POST", "/closed/7", "", "")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("fail closed: %d %v, want 503", r.Status, r.Err)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q leaks or differs", msg)
	}
	if ran.Load() != 0 {
		t.Fatal("handler ran with Redis down (fail closed)")
	}
	r = a.do(ctx, "POST", "/open/7", "", "")
	if r.Err != nil || r.Status != http.StatusOK || ran.Load() != 1 || leaseSeen.Load() {
		t.Fatalf("fail open: %d %v, ran %d, lease seen %v", r.Status, r.Err, ran.Load(), leaseSeen.Load())
	}
	if !strings.Contains(logBuf.String(), "fail-open") {
		t.Fatalf("fail-open not logged: %q", logBuf.String())
	}
	// The log names the route's pattern, not the key (request data).
	if log := logBuf.String(); !strings.Contains(log, "pattern=order:{path.voucher}") || strings.Contains(log, "order:7") {
		t.Fatalf("fail-open log should carry the pattern and never the key: %q", log)
	}
}

// TestLockLost: the lock key deleted behind a running handler's back → the
// handler's user context is cancelled with cause core.ErrLockLost.
func TestLockLost(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	inside := make(chan string, 1)
	causes := make(chan error, 1)
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}",
		TTL: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}),
		func(c *fiber.Ctx) error {
			ctx := c.UserContext()
			inside <- fiberlock.FromContext(c).Key()
			select {
			case <-ctx.Done():
				causes <- context.Cause(ctx)
			case <-time.After(10 * time.Second):
				causes <- errors.New("user context not cancelled within 10s")
			}
			return nil
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	done := make(chan locktest.Result, 1)
	go func() { done <- a.do(ctx, "POST", "/seckill/7", "", "") }()
	key := <-inside
	if err := srv.Client(t).Del(ctx, core.DefaultPrefix+"{"+key+"}").Err(); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want core.ErrLockLost", cause)
	}
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
}
