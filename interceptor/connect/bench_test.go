package connectlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/lockgate/lockgate/core"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/interceptor/connect/internal/testpbconnect"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// byHand is the lock a service would write itself: an interceptor that
// takes Order's lock (the annotation's key, wait and TTL, built by hand)
// around the handler, for BenchmarkLockedProcedure.
type byHand struct{ l *core.Locker }

func (h byHand) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		m := req.Any().(*testpb.OrderRequest)
		lease, err := h.l.Lock(ctx, "order:"+m.GetUserId()+":"+strconv.FormatInt(m.GetVoucherId(), 10),
			core.WithWait(2*time.Second), core.WithTTL(30*time.Second))
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		defer lease.Unlock(ctx)
		return next(lease.Context(), req)
	}
}

func (byHand) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (byHand) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// BenchmarkLockedProcedure measures, one of each in turn in every
// iteration (as the HTTP adapters' BenchmarkOverhead), so that the
// machine's drift hits all of them alike — back-to-back blocks made the
// cycle look cheaper than it is between calls:
//
//   - bare: a unary call of Order (Connect protocol, HTTP/2 without TLS,
//     loopback) to a server without the interceptor;
//   - locked: the same call to a server with it (the annotation's lock
//     order:u1:7 taken and released around the handler, uncontended);
//   - cycle: core's Lock+Unlock of one key on the same Locker and Redis,
//     from the benchmark's goroutine;
//   - by hand: the same call to a server whose own interceptor takes the
//     same lock with core directly (byHand).
//
// It reports each per operation, (locked − bare) / cycle — what the
// interceptor adds to a call, in lock cycles; the target is at most 1.2,
// a figure to read, not an assertion — and (locked − bare) / (by hand −
// bare): what connectlock adds over the same lock written by hand (1: no
// more). On a 2-core machine where client, server and Redis share the
// cores, a lock cycle made inside a server's handler costs more than one
// made back to back from the benchmark's goroutine, which is what the
// second ratio separates out.
func BenchmarkLockedProcedure(b *testing.B) {
	e := newBase(b)
	lk, err := connectlock.New(e.Locker)
	if err != nil {
		b.Fatal(err)
	}
	locked := serve(b, e.Service, connectHTTP1, connect.WithInterceptors(lk)).client()
	bare := serve(b, rpcsuite.NewService(), connectHTTP1).client()
	hand := serve(b, rpcsuite.NewService(), connectHTTP1, connect.WithInterceptors(byHand{e.Locker})).client()
	ctx := context.Background()
	req := connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	cycle := func() { locktest.Cycle(b, e.Locker, "bench:cycle") }
	// Warm both connections and the Locker.
	for range 16 {
		if _, err := bare.Order(ctx, req); err != nil {
			b.Fatal(err)
		}
		if r, err := locked.Order(ctx, req); err != nil || r.Msg.GetKey() != "order:u1:7" {
			b.Fatalf("locked call: %v, %v", r, err)
		}
		if r, err := hand.Order(ctx, req); err != nil || r.Msg.GetKey() != "order:u1:7" {
			b.Fatalf("call locked by hand: %v, %v", r, err)
		}
		cycle()
	}

	order := func(c testpbconnect.OrdersClient) func() {
		return func() {
			if _, err := c.Order(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	t := rpcsuite.Interleave(b, 1, rpcsuite.Repeat(order(bare)), rpcsuite.Repeat(order(locked)), rpcsuite.Repeat(cycle), rpcsuite.Repeat(order(hand)))
	tBare, tLocked, tCycle, tHand := t[0], t[1], t[2], t[3]
	rpcsuite.PerCall(b, tBare, "ns/call-bare")
	rpcsuite.PerCall(b, tLocked, "ns/call-locked")
	rpcsuite.PerCall(b, tHand, "ns/call-by-hand")
	rpcsuite.PerCall(b, tCycle, "ns/lock-cycle")
	if tCycle > 0 {
		b.ReportMetric(float64(tLocked-tBare)/float64(tCycle), "added/cycle")
	}
	if tHand > tBare {
		b.ReportMetric(float64(tLocked-tBare)/float64(tHand-tBare), "added/by-hand")
	}
}

// BenchmarkUnannotatedProcedure measures the interceptor on a procedure
// with no rule (one map lookup, then the handler): Plain on a server with
// the interceptor against one without, interleaved in blocks.
func BenchmarkUnannotatedProcedure(b *testing.B) {
	e := newBase(b)
	lk, err := connectlock.New(e.Locker)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	plain := func(c testpbconnect.OrdersClient) func() {
		return func() {
			if _, err := c.Plain(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	with := plain(serve(b, e.Service, connectH2C, connect.WithInterceptors(lk)).client())
	without := plain(serve(b, rpcsuite.NewService(), connectH2C).client())
	for range 16 {
		with()
		without()
	}
	t := rpcsuite.Interleave(b, 1, rpcsuite.Repeat(without), rpcsuite.Repeat(with))
	tWithout, tWith := t[0], t[1]
	rpcsuite.PerCall(b, tWithout, "ns/call-without")
	rpcsuite.PerCall(b, tWith, "ns/call-with")
	if tWithout > 0 {
		b.ReportMetric(float64(tWith)/float64(tWithout), "with/without")
	}
}
