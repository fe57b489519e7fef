package httpsuite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// leaseInHandler: the handler gets the lease (its key, from a bare {voucher}
// read from the path and escaped, and a fence), the lock is in Redis while
// it runs, and its ctx carries the lease: a nested Lock of the same key
// with ctx re-enters (same fence, and its Unlock leaves the hold in place),
// while the control, the same Lock with a context that does not derive
// from ctx, finds the lock busy. ctx is cancelled when the lease ends, and
// the lock is gone from Redis by the time the answer arrives.
func leaseInHandler(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	done := make(chan (<-chan struct{}), 1)
	h := func(ctx context.Context, lease *core.Lease, _ Request) (int, string) {
		if lease == nil {
			return http.StatusInternalServerError, "no lease"
		}
		if ctx.Err() != nil {
			return http.StatusInternalServerError, "ctx already done: " + context.Cause(ctx).Error()
		}
		if !e.inRedis(lease.Key()) {
			return http.StatusInternalServerError, "lock not in Redis"
		}
		inner, err := l.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		if err != nil {
			return http.StatusInternalServerError, "nested Lock with ctx: " + err.Error()
		}
		if !inner.Reentrant() || inner.Fence() != lease.Fence() {
			inner.Unlock(ctx)
			return http.StatusInternalServerError, fmt.Sprintf("nested Lock with ctx: reentrant %v, fence %d (lease's %d)", inner.Reentrant(), inner.Fence(), lease.Fence())
		}
		if err := inner.Unlock(ctx); err != nil {
			return http.StatusInternalServerError, "nested Unlock: " + err.Error()
		}
		if !e.inRedis(lease.Key()) || ctx.Err() != nil {
			return http.StatusInternalServerError, "the nested Unlock released the request's hold"
		}
		if other, err := l.Lock(context.Background(), lease.Key(), core.WithWait(core.NoWait)); !errors.Is(err, core.ErrNotObtained) {
			if err == nil {
				other.Unlock(context.Background())
			}
			return http.StatusInternalServerError, fmt.Sprintf("control: a Lock with an unrelated context: %v, want busy", err)
		}
		done <- ctx.Done()
		return http.StatusOK, fmt.Sprintf("%s %d", lease.Key(), lease.Fence())
	}
	base := e.serve(Route{Method: "POST", Path: "/v/{voucher}", Locker: l, Key: "order:{voucher}", Handler: h})
	r := e.post(base + "/v/a:b")
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v: %s", r.Status, r.Err, r.Body)
	}
	var key string
	var fence int64
	if _, err := fmt.Sscanf(r.Body, "%s %d", &key, &fence); err != nil || key != "order:a%3Ab" || fence <= 0 {
		t.Fatalf("handler saw lease %q (%v), want key order:a%%3Ab and a fence > 0", r.Body, err)
	}
	if e.held(key) {
		t.Fatal("the lock is still in Redis after the answer")
	}
	ctxDone := recv(t, done, "the handler's ctx")
	select {
	case <-ctxDone:
	default:
		// The release came before the answer (checked above); the lease's
		// context ends with it.
		t.Fatal("the handler's ctx is not cancelled after the lease ended")
	}
}

// ctxPlaceholder: {ctx.name} reads a value an earlier middleware stored in
// the request's context with keyfunc.WithValue.
func ctxPlaceholder(t *testing.T, s Stack) {
	if s.NoRequestContext {
		t.Skip("the stack cannot set the request's context (NoRequestContext)")
	}
	e := newEnv(t, s)
	l := e.locker()
	auth := func(parent context.Context) context.Context { return keyfunc.WithValue(parent, "user", 42) }
	h := func(_ context.Context, lease *core.Lease, _ Request) (int, string) { return http.StatusOK, lease.Key() }
	base := e.serve(
		Route{Method: "POST", Path: seckillPath, Locker: l, Key: "order:{ctx.user}:{path.voucher}", Context: auth, Handler: h},
		Route{Method: "POST", Path: "/anonymous/{voucher}", Locker: l, Key: "order:{ctx.user}:{path.voucher}", Handler: h},
	)
	if r := e.post(base + "/seckill/7"); r.Err != nil || r.Status != 200 || r.Body != "order:42:7" {
		t.Fatalf("got %d %v %q, want 200 under order:42:7", r.Status, r.Err, r.Body)
	}
	// The control: without the value, the key cannot be built.
	r := e.post(base + "/anonymous/7")
	if r.Err != nil || r.Status != http.StatusBadRequest {
		t.Fatalf("without the value: %d %v %s, want 400", r.Status, r.Err, r.Body)
	}
	if msg := errorText(t, r); msg != "ctx.user: missing or empty value" {
		t.Fatalf("text %q", msg)
	}
}
