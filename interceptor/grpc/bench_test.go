package grpclock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// report adds the per-call figures of both variants, measured in
// alternating blocks of the same run (rpcsuite.Interleave), and (ratio)
// their ratio.
func report(b *testing.B, with, without time.Duration, ratio bool) {
	rpcsuite.PerCall(b, without, "ns/call-without")
	rpcsuite.PerCall(b, with, "ns/call-with")
	rpcsuite.PerCall(b, with-without, "added-ns/call")
	if ratio && without > 0 {
		b.ReportMetric(float64(with)/float64(without), "with/without")
	}
}

// BenchmarkUnannotatedInterceptor measures the interceptor alone on a
// method with no rule (one map lookup, then the handler) against calling
// the handler directly.
func BenchmarkUnannotatedInterceptor(b *testing.B) {
	e := newBase(b)
	lk, err := grpclock.New(e.Locker)
	if err != nil {
		b.Fatal(err)
	}
	unary := lk.Unary()
	ctx := context.Background()
	req := &testpb.OrderRequest{UserId: "u1", VoucherId: 7}
	info := &grpc.UnaryServerInfo{FullMethod: methodPlain}
	resp := &testpb.OrderReply{}
	handler := func(context.Context, any) (any, error) { return resp, nil }

	b.ReportAllocs()
	t := rpcsuite.Interleave(b, 4096,
		func(n int) {
			// handler, declared in the op so that its calls are inlined
			// as the direct calls of a local closure are.
			direct := func(context.Context, any) (any, error) { return resp, nil }
			for range n {
				_, _ = direct(ctx, req)
			}
		},
		func(n int) {
			for range n {
				_, _ = unary(ctx, req, info, handler)
			}
		},
	)
	// No ratio: the bare handler is an inlined no-op, so added-ns/call is
	// the figure; BenchmarkUnannotatedRPC gives the ratio on a real call.
	report(b, t[1], t[0], false)
}

// BenchmarkUnannotatedRPC measures a whole unary RPC over loopback TCP to
// the unannotated method Plain, on a server with the interceptor and on one
// without, in alternating blocks of the same run.
func BenchmarkUnannotatedRPC(b *testing.B) {
	withEnv := newEnv(b)
	withoutEnv := newControl(b)
	ctx := context.Background()
	req := &testpb.OrderRequest{UserId: "u1", VoucherId: 7}
	plain := func(e *env) func() {
		return func() {
			if _, err := e.client.Plain(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	with, without := plain(withEnv), plain(withoutEnv)
	with() // warm both connections
	without()
	t := rpcsuite.Interleave(b, 64, rpcsuite.Repeat(without), rpcsuite.Repeat(with))
	report(b, t[1], t[0], true)
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
	i, id := 0, "0" // the iteration, the distinct part of its user and key
	t := rpcsuite.Interleave(b, 1,
		rpcsuite.Repeat(func() {
			if _, err := e.client.Plain(ctx, bare); err != nil {
				b.Fatal(err)
			}
		}),
		rpcsuite.Repeat(func() {
			if _, err := e.client.Order(ctx, &testpb.OrderRequest{UserId: "u" + id, VoucherId: 7}); err != nil {
				b.Fatal(err)
			}
		}),
		rpcsuite.Repeat(func() {
			locktest.Cycle(b, e.Locker, "cycle:"+id)
			i++
			id = strconv.Itoa(i)
		}),
	)
	tBare, tLocked, tCycle := t[0], t[1], t[2]
	rpcsuite.PerCall(b, tBare, "bare-ns/call")
	rpcsuite.PerCall(b, tLocked, "locked-ns/call")
	rpcsuite.PerCall(b, tCycle, "core-ns/cycle")
	b.ReportMetric(float64(tLocked-tBare)/float64(tCycle), "added/cycle")
}
