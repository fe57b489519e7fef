package grpclock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// report adds the per-call figures of both variants, measured in
// alternating blocks of the same run, and (ratio) their ratio.
func report(b *testing.B, with, without time.Duration, ratio bool) {
	n := float64(b.N)
	b.ReportMetric(float64(without.Nanoseconds())/n, "ns/call-without")
	b.ReportMetric(float64(with.Nanoseconds())/n, "ns/call-with")
	b.ReportMetric(float64((with-without).Nanoseconds())/n, "added-ns/call")
	if ratio && without > 0 {
		b.ReportMetric(float64(with)/float64(without), "with/without")
	}
}

// BenchmarkUnannotatedInterceptor measures the interceptor alone on a
// method with no rule (one map lookup, then the handler) against calling
// the handler directly.
func BenchmarkUnannotatedInterceptor(b *testing.B) {
	e := newBase(b)
	lk, err := grpclock.New(e.locker)
	if err != nil {
		b.Fatal(err)
	}
	unary := lk.Unary()
	ctx := context.Background()
	req := &testpb.OrderRequest{UserId: "u1", VoucherId: 7}
	info := &grpc.UnaryServerInfo{FullMethod: methodPlain}
	resp := &testpb.OrderReply{}
	handler := func(context.Context, any) (any, error) { return resp, nil }

	const block = 4096
	var with, without time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		t0 := time.Now()
		for range n {
			_, _ = handler(ctx, req)
		}
		t1 := time.Now()
		for range n {
			_, _ = unary(ctx, req, info, handler)
		}
		without += t1.Sub(t0)
		with += time.Since(t1)
	}
	b.StopTimer()
	// No ratio: the bare handler is an inlined no-op, so added-ns/call is
	// the figure; BenchmarkUnannotatedRPC gives the ratio on a real call.
	report(b, with, without, false)
}

// BenchmarkUnannotatedRPC measures a whole unary RPC over loopback TCP to
// the unannotated method Plain, on a server with the interceptor and on one
// without, in alternating blocks of the same run.
func BenchmarkUnannotatedRPC(b *testing.B) {
	withEnv := newEnv(b)
	withoutEnv := newControl(b)
	ctx := context.Background()
	req := &testpb.OrderRequest{UserId: "u1", VoucherId: 7}
	for _, e := range []*env{withEnv, withoutEnv} { // warm both connections
		if _, err := e.client.Plain(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	const block = 64
	var with, without time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		t0 := time.Now()
		for range n {
			if _, err := withoutEnv.client.Plain(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range n {
			if _, err := withEnv.client.Plain(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		without += t1.Sub(t0)
		with += time.Since(t1)
	}
	b.StopTimer()
	report(b, with, without, true)
}

// BenchmarkOverhead is the HTTP adapters' BenchmarkOverhead for gRPC: in
// every iteration, in turn, a call of the unannotated Plain (bare), a call
// of the annotated Order (its lock order:<user>:7 taken and released
// around the handler, a distinct user per call, uncontended), both on the
// same server, and core's Lock+Unlock of a distinct key on the same Locker
// from the benchmark's goroutine; it reports added/cycle: (locked − bare)
// ÷ cycle (target ≤ 1.2; a figure, not an assertion).
func BenchmarkOverhead(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	bare := &testpb.OrderRequest{UserId: "u0", VoucherId: 7}
	if _, err := e.client.Plain(ctx, bare); err != nil { // warm the connection
		b.Fatal(err)
	}
	var tBare, tLocked, tCycle time.Duration
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		t0 := time.Now()
		if _, err := e.client.Plain(ctx, bare); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u" + id, VoucherId: 7}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		lease, err := e.locker.Lock(ctx, "cycle:"+id)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		tBare, tLocked, tCycle = tBare+t1.Sub(t0), tLocked+t2.Sub(t1), tCycle+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tBare.Nanoseconds())/n, "bare-ns/call")
	b.ReportMetric(float64(tLocked.Nanoseconds())/n, "locked-ns/call")
	b.ReportMetric(float64(tCycle.Nanoseconds())/n, "core-ns/cycle")
	b.ReportMetric(float64(tLocked-tBare)/float64(tCycle), "added/cycle")
}
