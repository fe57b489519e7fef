package rpcsuite

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// callConcurrently makes n identical calls of method at once and returns
// the replies.
func callConcurrently(ctx context.Context, w *world, n int, method string, r *testpb.OrderRequest) []Reply {
	replies := make([]Reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i] = w.call(ctx, method, r)
		})
	}
	close(start)
	wg.Wait()
	return replies
}

// testOneAtATime: identical annotated calls run one at a time inside the
// handler; the control, the same service without the interceptor, shows
// that the check can fail.
func testOneAtATime(t *testing.T, s Stack) {
	const n = 12
	t.Run("locked", func(t *testing.T) {
		w := newWorld(t, s).serve(t, nil)
		for i, r := range callConcurrently(testCtx(t), w, n, "Order", req("u1", 7, 5)) {
			if r.Code != OK {
				t.Errorf("call %d: %v", i, r)
			}
		}
		if got := w.Service.MaxInside(); got != 1 {
			t.Fatalf("max calls inside the handler at once = %d, want 1", got)
		}
		if got := w.Service.Calls(); got != n {
			t.Fatalf("handler ran %d times, want %d", got, n)
		}
		if keys := w.LockKeys(t); len(keys) != 0 {
			t.Fatalf("locks left behind: %v", keys)
		}
	})
	t.Run("control without interceptor", func(t *testing.T) {
		w := newWorld(t, s).serveControl(t)
		// A long pause, cut short as soon as two calls are inside.
		for i, r := range callConcurrently(testCtx(t), w, n, "Order", req("u1", 7, 5000)) {
			if r.Code != OK {
				t.Errorf("call %d: %v", i, r)
			}
		}
		if got := w.Service.MaxInside(); got < 2 {
			t.Fatalf("control: max inside = %d; without the lock calls should overlap", got)
		}
	})
}

// testLeaseInHandler: the handler sees the lease (key built from the
// request with keyfunc's encoding, a fence that grows) through its context.
func testLeaseInHandler(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	r1 := w.call(ctx, "Order", req("u1", 7, 0))
	if r1.Code != OK || r1.Key() != "order:u1:7" || r1.Fence() <= 0 {
		t.Fatalf("Order = %v; want key order:u1:7 and a fence > 0", r1)
	}
	r2 := w.call(ctx, "Order", req("u1", 7, 0))
	if r2.Code != OK || r2.Fence() <= r1.Fence() {
		t.Fatalf("second Order = %v: fence not above the first's %d", r2, r1.Fence())
	}
	// Encoding: a ':' in a value is escaped, so ("a:b", 7) and ("a", ...)
	// cannot collide.
	if r3 := w.call(ctx, "Order", req("a:b", 7, 0)); r3.Code != OK || r3.Key() != "order:a%3Ab:7" {
		t.Fatalf("Order a:b = %v; want the keyfunc encoding order:a%%3Ab:7", r3)
	}
}

// testNestedReenters: inside the handler, a core.Lock of the same key with
// the handler's context re-enters the lock (same fence); the control, the
// same Lock with a context that does not carry the lease, is busy.
func testNestedReenters(t *testing.T, s Stack) {
	w := newWorld(t, s)
	type probe struct {
		key            string
		fence          int64
		reentered      bool
		innerFence     int64
		innerErr       error
		outsiderBusy   bool
		outsiderErr    error
		innerReleaseOK bool
	}
	probes := make(chan probe, 1)
	w.Service.OnHold = func(ctx context.Context, _ *testpb.OrderRequest) {
		lease := core.FromContext(ctx)
		p := probe{key: lease.Key(), fence: lease.Fence()}
		inner, err := w.Locker.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		p.innerErr = err
		if err == nil {
			p.reentered, p.innerFence = inner.Reentrant(), inner.Fence()
			p.innerReleaseOK = inner.Unlock(ctx) == nil
		}
		outsider, err := w.Locker.Lock(context.Background(), lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			_ = outsider.Unlock(context.Background())
		}
		p.outsiderBusy, p.outsiderErr = errors.Is(err, core.ErrNotObtained), err
		probes <- p
	}
	w.serve(t, nil)
	ctx := testCtx(t)
	done := w.startHolder(t, ctx, "Order", req("u1", 7, -1))
	p := <-probes
	if p.innerErr != nil || !p.reentered || p.innerFence != p.fence || !p.innerReleaseOK {
		t.Fatalf("nested Lock with the handler's context: %+v; want a re-entry of %s with fence %d", p, p.key, p.fence)
	}
	if !p.outsiderBusy {
		t.Fatalf("control: the same Lock with a fresh context: %v, want core.ErrNotObtained", p.outsiderErr)
	}
	if !w.Exists(t, w.LockKey("order:u1:7")) {
		t.Fatal("the nested Unlock released the outer lock")
	}
	w.Service.Release()
	if r := wait(t, done); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
}

// testBusy: with a short wait, a call for a held key gets
// ResourceExhausted naming the method with a RetryInfo carrying core's
// estimate of when the lock is likely free and, where the stack carries
// one (Stack.RetryAfterIn), the HTTP Retry-After the HTTP adapters send
// with their 429 (that estimate in whole seconds, at least 1); its handler
// does not run; once the holder is done the call succeeds, without a
// Retry-After (the control: not every answer carries one).
func testBusy(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", req("u1", 7, -1))

	r := w.call(ctx, "Quick", req("u1", 7, 0))
	if r.Code != ResourceExhausted {
		t.Fatalf("Quick on a held key: %v, want ResourceExhausted", r)
	}
	if !strings.Contains(r.Message, FullMethod("Quick")) {
		t.Errorf("message %q does not name the method %s", r.Message, FullMethod("Quick"))
	}
	if !r.RetryInfo {
		t.Fatalf("no RetryInfo detail in %v", r)
	}
	// The estimate is capped by the holder's remaining TTL, at most the
	// annotation's 30s.
	if r.RetryDelay <= 0 || r.RetryDelay > 30*time.Second {
		t.Fatalf("RetryInfo delay %v, want in (0, 30s]", r.RetryDelay)
	}
	if want := retryAfterSecs(r.RetryDelay); s.RetryAfterIn != Nowhere && r.RetryAfter(s.RetryAfterIn) != want {
		t.Fatalf("busy: %v; want Retry-After %q (the RetryInfo's delay in whole seconds) in the response's %s", r, want, where(s.RetryAfterIn))
	}
	if name := GoName(r.Message); name != "" {
		t.Fatalf("busy message %q names Go's %q", r.Message, name)
	}
	if got := w.Service.Calls(); got != 1 {
		t.Fatalf("handler ran %d times, want 1 (the busy call must not run)", got)
	}

	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
	if r := w.call(ctx, "Quick", req("u1", 7, 0)); r.Code != OK || r.RetryAfterHeader != "" || r.RetryAfterTrailer != "" {
		t.Fatalf("Quick after release: %v, want OK without Retry-After", r)
	}
}

// testDifferentKeys: calls with different keys do not wait for each other;
// the same key does (the control).
func testDifferentKeys(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", req("u1", 7, -1))
	if r := w.call(ctx, "Quick", req("u2", 7, 0)); r.Code != OK || r.Key() != "order:u2:7" {
		t.Fatalf("another key while u1 is held: %v", r)
	}
	if r := w.call(ctx, "Quick", req("u1", 8, 0)); r.Code != OK || r.Key() != "order:u1:8" {
		t.Fatalf("another voucher while u1:7 is held: %v", r)
	}
	if r := w.call(ctx, "Quick", req("u1", 7, 0)); r.Code != ResourceExhausted {
		t.Fatalf("control: the held key: %v, want ResourceExhausted", r)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
}

// testUnannotated: a method without annotation or rule runs without a
// lease, locks nothing and is not blocked by a held lock of the same
// values.
func testUnannotated(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", req("u1", 7, -1))
	before := w.LockKeys(t)

	r := w.call(ctx, "Plain", req("u1", 7, 0))
	if r.Code != OK || r.Key() != "" || r.Fence() != 0 || r.Echo() != "u1" {
		t.Fatalf("Plain = %v: want no lease and the request intact", r)
	}
	if after := w.LockKeys(t); len(after) != len(before) {
		t.Fatalf("Plain locked something: before %v after %v", before, after)
	}
	// An empty request is fine too: no key is built.
	if r := w.call(ctx, "Plain", &testpb.OrderRequest{}); r.Code != OK {
		t.Fatalf("Plain with an empty request: %v", r)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
}
