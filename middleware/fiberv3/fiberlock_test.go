package fiberlock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
	"github.com/lockgate/lockgate/redistest"
)

// TestLeaseInHandler: in the handler FromContext(c) and
// FromContext(c.Context()) return the same lease, c.Context() is its
// Context and a nested Lock with it re-enters; {ctx.user} reads c.Locals
// and {ctx.tenant} the request context set by earlier middleware
// (keyfunc.WithValue). After the middleware, the earlier middleware sees
// its own request context again, live, and no lease through either. The
// control of the documented limit: a Lock of the held key with the
// fiber.Ctx itself does not see the lease (with Fiber's default Ctx its
// Value reads c.Locals only) and is busy.
func TestLeaseInHandler(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	type seen struct {
		key                 string
		fence               int64
		same, fromCtx       bool
		earlier             bool // the lease's Context carries the earlier context's values
		reentered           bool
		err                 error
		withCtxItself       error // Lock(c, key) inside the handler
		afterCtx, afterNone bool  // after the middleware: own context back, no lease
	}
	got := make(chan seen, 1)
	type mine struct{}
	f := newApp()
	f.Use(func(c fiber.Ctx) error { // an auth middleware
		c.Locals("user", 42)
		ctx := context.WithValue(keyfunc.WithValue(c.Context(), "tenant", "acme"), mine{}, true)
		c.SetContext(ctx)
		err := c.Next()
		s := <-got
		s.afterCtx = c.Context() == ctx && ctx.Err() == nil
		s.afterNone = fiberlock.FromContext(c) == nil && fiberlock.FromContext(c.Context()) == nil
		got <- s
		return err
	})
	f.Post("/v/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{ctx.tenant}:{ctx.user}:{voucher}"}), func(c fiber.Ctx) error {
		lease := fiberlock.FromContext(c)
		ctx := c.Context()
		s := seen{key: lease.Key(), fence: lease.Fence(), same: ctx == lease.Context(), fromCtx: fiberlock.FromContext(ctx) == lease}
		s.earlier = ctx.Value(mine{}) == true
		inner, err := l.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			s.reentered = inner.Reentrant()
			err = inner.Unlock(ctx)
		}
		s.err = err
		if other, err := l.Lock(c, lease.Key(), core.WithWait(core.NoWait)); err == nil {
			other.Unlock(ctx)
			s.withCtxItself = errors.New("obtained")
		} else {
			s.withCtxItself = err
		}
		got <- s
		return nil
	})
	a := start(t, f)
	if r := a.do(locktest.Context(t), "POST", "/v/a:b", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
	}
	s := <-got
	if s.key != "order:acme:42:a%3Ab" || s.fence <= 0 || !s.same || !s.fromCtx || !s.earlier || !s.reentered || s.err != nil {
		t.Fatalf("handler saw %+v", s)
	}
	if !s.afterCtx || !s.afterNone {
		t.Fatalf("after the middleware: own context back %v, no lease %v", s.afterCtx, s.afterNone)
	}
	if !errors.Is(s.withCtxItself, core.ErrNotObtained) {
		t.Fatalf("Lock of the held key with the fiber.Ctx itself: %v, want busy (documented: pass c.Context())", s.withCtxItself)
	}
}

// TestFromContextOutside: FromContext is nil for a nil context, a plain
// context and a fiber.Ctx of a route without the middleware.
func TestFromContextOutside(t *testing.T) {
	//lint:ignore SA1012 a nil context on purpose: FromContext must not panic on one
	if fiberlock.FromContext(nil) != nil || fiberlock.FromContext(context.Background()) != nil {
		t.Fatal("lease outside a request")
	}
	var sawLease atomic.Bool
	f := newApp()
	f.Get("/bare", func(c fiber.Ctx) error {
		sawLease.Store(fiberlock.FromContext(c) != nil || fiberlock.FromContext(c.Context()) != nil)
		return c.SendString("ok")
	})
	a := start(t, f)
	if r := a.do(locktest.Context(t), "GET", "/bare", "", ""); r.Err != nil || r.Status != 200 || sawLease.Load() {
		t.Fatalf("bare route: %d %v, lease seen %v", r.Status, r.Err, sawLease.Load())
	}
}

// TestNestedMiddleware: two fiberlock middlewares on one route. For the
// same key the inner one re-enters the outer's lock through c.Context()
// (no wait, same fence); for different keys the handler sees the inner
// lease, and code between the two (after the inner returns) sees the
// outer lease and its Context again. The control: both keys are free
// afterwards.
func TestNestedMiddleware(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	type seen struct {
		outerKey, innerKey, handlerKey string
		outerFence, innerFence         int64
		reentrant                      bool
		between                        bool // between the two after the inner: the outer lease and Context
	}
	got := make(chan seen, 1)
	var s seen
	outer := func(key string) fiber.Handler {
		return fiberlock.New(fiberlock.Config{Locker: l, Key: key, Wait: core.NoWait})
	}
	probe := func(c fiber.Ctx) error { // between the two middlewares
		lease := fiberlock.FromContext(c)
		s.outerKey, s.outerFence = lease.Key(), lease.Fence()
		err := c.Next()
		s.between = fiberlock.FromContext(c) == lease && c.Context() == lease.Context() && fiberlock.FromContext(c.Context()) == lease
		got <- s
		return err
	}
	handler := func(c fiber.Ctx) error {
		lease := fiberlock.FromContext(c)
		s.innerKey, s.innerFence, s.reentrant = lease.Key(), lease.Fence(), lease.Reentrant()
		s.handlerKey = fiberlock.FromContext(c.Context()).Key()
		return nil
	}
	f := newApp()
	f.Post("/same/:id", outer("o:{path.id}"), probe, outer("o:{path.id}"), handler)
	f.Post("/two/:id", outer("o:{path.id}"), probe, outer("i:{path.id}"), handler)
	a := start(t, f)
	ctx := locktest.Context(t)

	if r := a.do(ctx, "POST", "/same/1", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("same key: %d %v %s", r.Status, r.Err, r.Body)
	}
	if s := <-got; s.innerKey != "o:1" || !s.reentrant || s.innerFence != s.outerFence || !s.between {
		t.Fatalf("same key: %+v, want the inner middleware to re-enter the outer lock", s)
	}
	s = seen{}
	if r := a.do(ctx, "POST", "/two/1", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("two keys: %d %v %s", r.Status, r.Err, r.Body)
	}
	if s := <-got; s.outerKey != "o:1" || s.innerKey != "i:1" || s.handlerKey != "i:1" || s.reentrant || !s.between {
		t.Fatalf("two keys: %+v", s)
	}
	for _, k := range []string{"o:1", "i:1"} {
		if locktest.Held(t, ctx, rc, k) {
			t.Fatalf("%s still held", k)
		}
	}
}

// TestNextSkips: Config.Next skips the middleware: the handler runs
// without a lease even though the key cannot be built. The control: the
// same request without the skip header is a 400 and the handler does not
// run.
func TestNextSkips(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var ran atomic.Int32
	f := newApp()
	f.Post("/x", fiberlock.New(fiberlock.Config{Locker: l, Key: "x:{query.id}", Next: func(c fiber.Ctx) bool { return c.Get("X-Skip") != "" }}),
		func(c fiber.Ctx) error {
			ran.Add(1)
			if fiberlock.FromContext(c) != nil || fiberlock.FromContext(c.Context()) != nil {
				return c.SendString("leased")
			}
			return c.SendString("bare")
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	send := func(skip bool) locktest.Result {
		req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/x", nil) // no id: 400 unless skipped
		if skip {
			req.Header.Set("X-Skip", "1")
		}
		resp, err := a.client.Do(req)
		if err != nil {
			return locktest.Result{Err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return locktest.Result{Status: resp.StatusCode, Body: string(b)}
	}
	if r := send(true); r.Err != nil || r.Status != 200 || r.Body != "bare" {
		t.Fatalf("skipped request: %d %v %q, want 200 without a lease", r.Status, r.Err, r.Body)
	}
	if r := send(false); r.Err != nil || r.Status != 400 || ran.Load() != 1 {
		t.Fatalf("control, not skipped: %d %v %q, ran %d; want 400 and the handler not run", r.Status, r.Err, r.Body, ran.Load())
	}
}

// TestErrorReleases: a handler that returns an error — a *fiber.Error
// (its status) or a plain one (500), both answered by Fiber's error
// handler after the middleware returned — has its lock released by the
// time the client sees the answer: the next request obtains it with no
// wait at all. (A panic is the shared suite's PanicReleases.)
func TestErrorReleases(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var calls atomic.Int32
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}", Wait: core.NoWait}),
		func(c fiber.Ctx) error {
			switch calls.Add(1) {
			case 1:
				return fiber.NewError(fiber.StatusTeapot, "handler error")
			case 2:
				return errors.New("plain handler error")
			}
			return nil
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	rc := srv.Client(t)
	for i, want := range []int{http.StatusTeapot, http.StatusInternalServerError, http.StatusOK} {
		r := a.do(ctx, "POST", "/seckill/7?user_id=1", "", "")
		if r.Err != nil || r.Status != want {
			t.Fatalf("request %d: %d %v %s, want %d", i, r.Status, r.Err, r.Body, want)
		}
		if locktest.Held(t, ctx, rc, "order:1:7") {
			t.Fatalf("request %d: lock key still exists", i)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}
