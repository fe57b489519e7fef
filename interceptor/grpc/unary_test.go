package grpclock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
)

// callConcurrently makes n identical Order calls at once and returns the
// errors.
func callConcurrently(ctx context.Context, e *env, n int, req *testpb.OrderRequest) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.client.Order(ctx, req)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// TestConcurrentCallsNeverOverlap: identical annotated calls run one at a
// time inside the handler; the control, the same service without the
// interceptor, shows that the check can fail.
func TestConcurrentCallsNeverOverlap(t *testing.T) {
	const n = 12
	t.Run("locked", func(t *testing.T) {
		e := newEnv(t)
		errs := callConcurrently(testCtx(t), e, n, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: 5})
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if got := e.svc.maxInside.Load(); got != 1 {
			t.Fatalf("max calls inside the handler at once = %d, want 1", got)
		}
		if got := e.svc.calls.Load(); got != n {
			t.Fatalf("handler ran %d times, want %d", got, n)
		}
		if keys := e.lockKeys(t); len(keys) != 0 {
			t.Fatalf("locks left behind: %v", keys)
		}
	})
	t.Run("control without interceptor", func(t *testing.T) {
		e := newControl(t)
		// A long pause, cut short as soon as two calls are inside.
		errs := callConcurrently(testCtx(t), e, n, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: 5000})
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if got := e.svc.maxInside.Load(); got < 2 {
			t.Fatalf("control: max inside = %d; without the lock calls should overlap", got)
		}
	})
}

// TestHandlerContextCarriesLease: the handler sees the lease (key built
// from the request, a fence) through FromContext.
func TestHandlerContextCarriesLease(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	r1, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if r1.GetKey() != "order:u1:7" || r1.GetFence() <= 0 {
		t.Fatalf("lease in handler: key %q fence %d; want order:u1:7 and a fence > 0", r1.GetKey(), r1.GetFence())
	}
	r2, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if r2.GetFence() <= r1.GetFence() {
		t.Fatalf("second fence %d not above first %d", r2.GetFence(), r1.GetFence())
	}
	// Encoding: a ':' in a value is escaped, so ("a:b", 7) and ("a", ...)
	// cannot collide.
	r3, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "a:b", VoucherId: 7})
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if r3.GetKey() != "order:a%3Ab:7" {
		t.Fatalf("key = %q, want the keyfunc encoding order:a%%3Ab:7", r3.GetKey())
	}
}

// TestBusyResourceExhausted: with a short wait, a call for a held key gets
// ResourceExhausted naming the method with a RetryInfo carrying core's
// estimate of when the lock is likely free; once the holder is done the
// call succeeds. (TestLockStatusMapping checks that the delay is the
// estimate, not the holder's TTL.)
func TestBusyResourceExhausted(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})

	_, err := e.client.Quick(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("Quick on a held key: %v, want ResourceExhausted", err)
	}
	if !strings.Contains(st.Message(), methodQuick) {
		t.Errorf("message %q does not name the method %s", st.Message(), methodQuick)
	}
	var ri *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			ri = r
		}
	}
	if ri == nil {
		t.Fatalf("no RetryInfo detail in %v", st.Details())
	}
	// The estimate is capped by the holder's remaining TTL, at most the
	// annotation's 30s.
	if d := ri.GetRetryDelay().AsDuration(); d <= 0 || d > 30*time.Second {
		t.Fatalf("RetryInfo delay %v, want in (0, 30s]", d)
	}
	if got := e.svc.calls.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1 (the busy call must not run)", got)
	}

	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if _, err := e.client.Quick(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7}); err != nil {
		t.Fatalf("Quick after release: %v", err)
	}
}

// TestDifferentKeysRunInParallel: calls with different keys do not wait for
// each other.
func TestDifferentKeysRunInParallel(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	if _, err := e.client.Quick(ctx, &testpb.OrderRequest{UserId: "u2", VoucherId: 7}); err != nil {
		t.Fatalf("another key while u1 is held: %v", err)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestRedisDownUnavailable: with Redis stopped, a locked call fails with
// Unavailable and its handler never runs; a fail-open method runs without a
// lease; an unannotated method is unaffected.
func TestRedisDownUnavailable(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.redis.Stop()

	_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("Order with Redis down: %v, want Unavailable", err)
	}
	if strings.Contains(st.Message(), "127.0.0.1") || strings.Contains(st.Message(), "refused") {
		t.Errorf("internal error text leaked to the client: %q", st.Message())
	}
	if got := e.svc.calls.Load(); got != 0 {
		t.Fatalf("handler ran %d times with Redis down, want 0", got)
	}

	r, err := e.client.Relaxed(ctx, &testpb.OrderRequest{UserId: "u1"})
	if err != nil {
		t.Fatalf("fail-open Relaxed with Redis down: %v", err)
	}
	if r.GetKey() != "" || r.GetFence() != 0 {
		t.Fatalf("fail-open handler saw a lease (%q, %d), want none", r.GetKey(), r.GetFence())
	}
	if _, err := e.client.Plain(ctx, &testpb.OrderRequest{UserId: "u1"}); err != nil {
		t.Fatalf("Plain with Redis down: %v", err)
	}
	if got := e.svc.calls.Load(); got != 2 {
		t.Fatalf("handler ran %d times, want 2 (Relaxed, Plain)", got)
	}
}

// TestInvalidKey: a missing, empty, too long or control-character value is
// InvalidArgument naming the placeholder; nothing runs, nothing is locked.
func TestInvalidKey(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	md := metadata.AppendToOutgoingContext(ctx, "x-user-id", "m1")
	for _, tc := range []struct {
		name string
		call func() error
		part string
	}{
		{"missing user_id", func() error {
			_, err := e.client.Order(ctx, &testpb.OrderRequest{VoucherId: 7})
			return err
		}, "user_id"},
		{"zero voucher_id", func() error {
			_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1"})
			return err
		}, "voucher_id"},
		{"missing nested message", func() error {
			_, err := e.client.Nested(md, &testpb.OrderRequest{})
			return err
		}, "field.item.sku"},
		{"empty nested field", func() error {
			_, err := e.client.Nested(md, &testpb.OrderRequest{Item: &testpb.Item{Count: 2}})
			return err
		}, "field.item.sku"},
		{"missing metadata", func() error {
			_, err := e.client.Nested(ctx, &testpb.OrderRequest{Item: &testpb.Item{Sku: "s1"}})
			return err
		}, "md.x-user-id"},
		{"too long", func() error {
			_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: strings.Repeat("x", 300), VoucherId: 7})
			return err
		}, "user_id"},
		{"control character", func() error {
			_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "a\nb", VoucherId: 7})
			return err
		}, "user_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			if !strings.Contains(st.Message(), tc.part) {
				t.Fatalf("message %q does not name %q", st.Message(), tc.part)
			}
		})
	}
	if got := e.svc.calls.Load(); got != 0 {
		t.Fatalf("handler ran %d times on bad keys, want 0", got)
	}
	if keys := e.lockKeys(t); len(keys) != 0 {
		t.Fatalf("bad keys locked something: %v", keys)
	}
	// The same method with good values works (nested field + metadata).
	r, err := e.client.Nested(md, &testpb.OrderRequest{Item: &testpb.Item{Sku: "s1"}})
	if err != nil || r.GetKey() != "sku:s1:m1" {
		t.Fatalf("Nested = %v, %v; want key sku:s1:m1", r, err)
	}
}

// TestUnannotatedUntouched: a method without annotation or rule runs
// without lease, locks nothing and is not blocked by a held lock.
func TestUnannotatedUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	before := e.lockKeys(t)

	r, err := e.client.Plain(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if err != nil {
		t.Fatalf("Plain: %v", err)
	}
	if r.GetKey() != "" || r.GetFence() != 0 || r.GetEcho() != "u1" {
		t.Fatalf("Plain reply %v: want no lease and the request intact", r)
	}
	if after := e.lockKeys(t); len(after) != len(before) {
		t.Fatalf("Plain locked something: before %v after %v", before, after)
	}
	// An empty request is fine too: no key is built.
	if _, err := e.client.Plain(ctx, &testpb.OrderRequest{}); err != nil {
		t.Fatalf("Plain with empty request: %v", err)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestGoRuleOverridesAnnotation: a Go rule for an annotated method replaces
// the annotation (here: lock on metadata instead of the request fields,
// single attempt); a Go rule can also lock an unannotated method.
func TestGoRuleOverridesAnnotation(t *testing.T) {
	e := newEnv(t,
		grpclock.WithRule(methodOrder, grpclock.Rule{Key: "go:{md.x-user-id}", Options: []core.LockOption{core.WithWait(core.NoWait)}}),
		grpclock.WithRule(methodPlain, grpclock.Rule{Key: "plain:{user_id}", Options: []core.LockOption{core.WithWait(core.NoWait)}}),
	)
	ctx := testCtx(t)
	m1 := metadata.AppendToOutgoingContext(ctx, "x-user-id", "m1")

	r, err := e.client.Order(m1, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if err != nil || r.GetKey() != "go:m1" {
		t.Fatalf("Order under the Go rule = %v, %v; want key go:m1", r, err)
	}
	// Without the metadata the Go rule's key is missing, although the
	// annotation's fields are all there.
	_, err = e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "md.x-user-id") {
		t.Fatalf("Order without metadata: %v, want InvalidArgument naming md.x-user-id", err)
	}
	// Two calls with different request fields but the same metadata
	// collide under the Go rule; the second fails at once (wait 0), not
	// after the annotation's 2s.
	held := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(m1, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	start := time.Now()
	_, err = e.client.Order(m1, &testpb.OrderRequest{UserId: "u2", VoucherId: 8})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second Order under the Go rule: %v, want ResourceExhausted", err)
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Fatalf("busy answer took %v: the annotation's 2s wait was used, not the Go rule's 0", d)
	}
	e.svc.release()
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	r, err = e.client.Plain(ctx, &testpb.OrderRequest{UserId: "u9"})
	if err != nil || r.GetKey() != "plain:u9" {
		t.Fatalf("Plain under a Go rule = %v, %v; want key plain:u9", r, err)
	}
}

// TestLockLostCancelsHandler: when the lock is deleted behind the
// handler's back, the handler's context is cancelled with ErrLockLost.
func TestLockLostCancelsHandler(t *testing.T) {
	e := newEnv(t, grpclock.WithRule(methodOrder, grpclock.Rule{Key: "order:{user_id}:{voucher_id}", TTL: 300 * time.Millisecond}))
	ctx := testCtx(t)
	done := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u1", VoucherId: 7, PauseMs: -1})
		return err
	})
	if n, err := e.rdb.Del(ctx, e.prefix+"{order:u1:7}").Result(); err != nil || n != 1 {
		t.Fatalf("DEL lock: %d, %v", n, err)
	}
	select {
	case cause := <-e.svc.causes:
		if !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("handler ctx cause = %v, want ErrLockLost", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler ctx not cancelled within 10s of the lock's deletion")
	}
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("call result %v, want Canceled from the handler", err)
	}
}
