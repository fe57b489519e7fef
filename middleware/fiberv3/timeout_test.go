package fiberlock_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/timeout"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
	"github.com/lockgate/lockgate/redistest"
)

// TestTimeoutInFront: Fiber v3's timeout middleware in front of the lock
// (the order doc.go recommends) answers 408 at the timeout while the
// handler goes on in its goroutine, and the lock stays held until that
// handler returns: a second request for the key is busy meanwhile, and the
// lock is released only when the first handler is done. The control: the
// key is free for a third request afterwards.
func TestTimeoutInFront(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	inside := make(chan struct{}, 1)
	leave := make(chan struct{})
	finished := make(chan string, 3) // the path of each request whose chain returned
	f := newApp()
	f.Use(timeout.New(func(c fiber.Ctx) error {
		err := c.Next() // the middleware's release included
		finished <- c.Query("n")
		return err
	}, timeout.Config{Timeout: 300 * time.Millisecond}))
	f.Post("/o/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Wait: core.NoWait}),
		func(c fiber.Ctx) error {
			if c.Query("n") == "1" {
				inside <- struct{}{}
				<-leave
			}
			return c.SendString("ok")
		})
	a := start(t, f)
	t.Cleanup(func() {
		select {
		case <-leave:
		default:
			close(leave)
		}
	})
	ctx := locktest.Context(t)

	first := make(chan locktest.Result, 1)
	go func() { first <- a.do(ctx, "POST", "/o/7?n=1", "", "") }()
	<-inside
	if r := <-first; r.Err != nil || r.Status != http.StatusRequestTimeout {
		t.Fatalf("first request: %d %v %s, want 408 at the timeout", r.Status, r.Err, r.Body)
	}
	if !locktest.Held(t, ctx, rc, "order:7") {
		t.Fatal("the lock was released at the timeout while the handler still runs")
	}
	if r := a.do(ctx, "POST", "/o/7?n=2", "", ""); r.Err != nil || r.Status != http.StatusTooManyRequests {
		t.Fatalf("second request while the first handler runs: %d %v %s, want 429", r.Status, r.Err, r.Body)
	}
	if n := <-finished; n != "2" {
		t.Fatalf("request %s finished first, want the second", n)
	}
	close(leave)
	if n := <-finished; n != "1" {
		t.Fatalf("request %s finished, want the first", n)
	}
	if locktest.Held(t, ctx, rc, "order:7") {
		t.Fatal("the lock is still held after the first handler returned")
	}
	if r := a.do(ctx, "POST", "/o/7?n=3", "", ""); r.Err != nil || r.Status != http.StatusOK {
		t.Fatalf("control, third request: %d %v %s, want 200", r.Status, r.Err, r.Body)
	}
}

// TestTimeoutBehind: the timeout middleware behind the lock (around the
// handler) returns 408 at its timeout and leaves the handler running in
// its goroutine, which still owns the fiber.Ctx. The middleware then
// leaves the Ctx alone (no data race with that goroutine: -race) and
// releases the lock, as for a lost lock: the handler's c.Context() is
// already over (the timeout's deadline; the lease's Context, its parent,
// is cancelled too). This is the order doc.go warns against: the handler
// may go on without the lock. The control: a request that ends before the
// timeout is served under the lock.
func TestTimeoutBehind(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	type seen struct {
		ctx   context.Context
		lease *core.Lease
	}
	inside := make(chan seen, 1)
	leave := make(chan struct{})
	f := newApp()
	f.Post("/o/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Wait: core.NoWait}),
		timeout.New(func(c fiber.Ctx) error {
			if c.Query("hold") == "" {
				return c.SendString("ok")
			}
			inside <- seen{c.Context(), fiberlock.FromContext(c)}
			<-leave // after the timeout: c is not to be touched any more
			return nil
		}, timeout.Config{Timeout: 300 * time.Millisecond}))
	a := start(t, f)
	t.Cleanup(func() { close(leave) })
	ctx := locktest.Context(t)

	if r := a.do(ctx, "POST", "/o/7", "", ""); r.Err != nil || r.Status != http.StatusOK || r.Body != "ok" {
		t.Fatalf("control: %d %v %s, want 200", r.Status, r.Err, r.Body)
	}
	r := a.do(ctx, "POST", "/o/7?hold=1", "", "")
	if r.Err != nil || r.Status != http.StatusRequestTimeout {
		t.Fatalf("status %d %v %s, want 408", r.Status, r.Err, r.Body)
	}
	s := <-inside
	if s.ctx.Err() == nil || s.lease.Context().Err() == nil {
		t.Fatalf("after the timeout the handler's context is live (%v) or the lease's (%v)", s.ctx.Err(), s.lease.Context().Err())
	}
	if locktest.Held(t, ctx, rc, "order:7") {
		t.Fatal("the lock is still held after the middleware returned")
	}
}
