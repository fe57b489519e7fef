package httpsuite

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// contextOutcomes: a request whose context ended before the lock (as an
// earlier middleware hands it over) answers for it: a passed deadline is
// 503 saying so, a cancellation 499, a cancellation whose cause is
// lockgate's (a lost lease) 503 — never 429, never the handler, FailOpen on.
// The control: the same route with a live context serves 200.
func contextOutcomes(t *testing.T, s Stack) {
	if s.NoRequestContext {
		t.Skip("the stack cannot set the request's context (NoRequestContext)")
	}
	e := newEnv(t, s)
	l := e.locker()
	c := &counter{}
	cases := []struct {
		name   string
		ctx    func(parent context.Context) context.Context
		status int
		text   string
	}{
		{"deadline passed", func(parent context.Context) context.Context {
			ctx, cancel := context.WithDeadline(parent, time.Now().Add(-time.Second))
			cancel() // already ended by its deadline: Err stays DeadlineExceeded
			return ctx
		}, http.StatusServiceUnavailable, "the request's deadline passed while waiting for the lock"},
		{"cancelled", func(parent context.Context) context.Context {
			ctx, cancel := context.WithCancel(parent)
			cancel()
			return ctx
		}, 499, "client closed request"},
		{"cancelled by a lost lease", func(parent context.Context) context.Context {
			ctx, cancel := context.WithCancelCause(parent)
			cancel(core.ErrLockLost)
			return ctx
		}, http.StatusServiceUnavailable, "lock service unavailable"},
		{"control: live", nil, http.StatusOK, ""},
	}
	var routes []Route
	for i, c2 := range cases {
		routes = append(routes, Route{Method: "POST", Path: "/o" + strconv.Itoa(i) + "/{voucher}", Locker: l, Key: "order:{path.voucher}",
			Options: Options{FailOpen: true, Logger: quiet()}, Context: c2.ctx, Handler: c.handler})
	}
	base := e.serve(routes...)
	for i, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			before := c.n()
			r := e.post(base + "/o" + strconv.Itoa(i) + "/7")
			if r.Err != nil || r.Status != cc.status {
				t.Fatalf("status %d %v %s, want %d", r.Status, r.Err, r.Body, cc.status)
			}
			if cc.status == http.StatusOK {
				if c.n() != before+1 {
					t.Fatal("control: the handler did not run")
				}
				return
			}
			if msg := errorText(t, r); msg != cc.text {
				t.Fatalf("text %q, want %q", msg, cc.text)
			}
			if c.n() != before {
				t.Fatal("the handler ran")
			}
		})
	}
}

// clientGoneWhileWaiting: the client hangs up while its request waits for a
// lock held elsewhere; the wait ends with the request's cancellation (not
// the 30s wait, not the holder's release) and the handler never runs. The
// control: once the holder releases, the same route serves the next
// request, and the handler has run once, for it.
func clientGoneWhileWaiting(t *testing.T, s Stack) {
	if s.NoClientCancel {
		t.Skip("the framework does not cancel the request's context when the client goes away (NoClientCancel)")
	}
	e := newEnv(t, s)
	var ev locktest.Events
	l := e.locker(core.WithObserver(&ev))
	other := e.locker()
	held, err := other.Lock(e.ctx, "order:7")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	c := &counter{}
	base := e.serve(Route{Method: "POST", Path: "/o/{voucher}", Locker: l, Key: "order:{path.voucher}",
		Options: Options{Wait: 30 * time.Second, Logger: quiet()}, Handler: c.handler})

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	gone := make(chan locktest.Result, 1)
	go func() { gone <- locktest.Do(ctx, e.client, "POST", base+"/o/7", "", "") }()
	if _, ok := ev.Wait(e.waitCtx(), locktest.Is(core.EventWaiting, "order:7")); !ok {
		t.Fatal("the request never waited for the lock")
	}
	cancel()
	if r := recv(t, gone, "the cancelled request"); r.Err == nil {
		t.Fatalf("the cancelled request was answered %d %s", r.Status, r.Body)
	}
	gaveUp, ok := ev.Wait(e.waitCtx(), locktest.Is(core.EventNotObtained, "order:7"))
	if !ok {
		t.Fatal("the wait did not end after the client went away")
	}
	if !errors.Is(gaveUp.Err, context.Canceled) {
		t.Fatalf("the wait ended with %v, want the request's cancellation", gaveUp.Err)
	}
	if err := held.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.post(base + "/o/7"); r.Err != nil || r.Status != 200 {
		t.Fatalf("control, the lock free: %d %v %s, want 200", r.Status, r.Err, r.Body)
	}
	if c.n() != 1 {
		t.Fatalf("handler ran %d times, want once (the control only)", c.n())
	}
}
