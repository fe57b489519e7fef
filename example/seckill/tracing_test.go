package seckill

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/internal/locktest"
	otellock "github.com/lockgate/lockgate/otel"
	"github.com/lockgate/lockgate/redistest"
)

// TestTracing: with Config.Tracer, an order (every HTTP stack, gRPC,
// Connect) runs
// in a server span that continues the caller's traceparent, and its
// lock's span "lock <pattern>" (otellock, given the same provider) is a
// child of it. While the test holds the order's lock under a span of its
// own, the order waits, and its lock span links to the test's span: the
// holder tag the server span makes possible. No span name or attribute
// carries the user id. Control: without Tracer no span is made at all,
// the lock's included (otellock traces only inside a recording span).
func TestTracing(t *testing.T) {
	srv := redistest.Start(t)
	const user = 90817263
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct{ entry, serverSpan, lockSpan string }{
		{StackFiber, "POST /voucher-order/seckill/:voucher_id", "lock " + OrderKeyTemplate},
		{StackFiberV3, "POST /voucher-order/seckill/:voucher_id", "lock " + OrderKeyTemplate},
		{StackNetHTTP, "POST /voucher-order/seckill/{voucher_id}", "lock " + OrderKeyTemplate},
		{StackChi, "POST /voucher-order/seckill/{voucher_id}", "lock " + OrderKeyTemplate},
		{StackGin, "POST /voucher-order/seckill/:voucher_id", "lock " + OrderKeyTemplate},
		{StackEcho, "POST /voucher-order/seckill/:voucher_id", "lock " + OrderKeyTemplate},
		{StackEchoV5, "POST /voucher-order/seckill/:voucher_id", "lock " + OrderKeyTemplate},
		{"grpc", "seckill.v1.Seckill/Order", "lock order:{user_id}:{voucher_id}"},
		{"connect", "seckill.v1.Seckill/Order", "lock order:{user_id}:{voucher_id}"},
	} {
		for _, traced := range []bool{true, false} {
			name := c.entry + "/traced"
			if !traced {
				name = c.entry + "/untraced"
			}
			t.Run(name, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				defer tp.Shutdown(context.Background())
				obs, err := otellock.New(otellock.WithTracerProvider(tp))
				if err != nil {
					t.Fatal(err)
				}
				client := redis.NewClient(&redis.Options{Addr: srv.Addr})
				defer client.Close()
				// events tells the holder when the order waits for the lock.
				var events locktest.Events
				locker := core.Must(core.New(client, append(obs.Options(), core.WithObserver(locktest.Observers(obs, &events)))...))
				defer locker.Close()
				st := openStore(t, filepath.Join(t.TempDir(), "seckill.db"))
				seed(t, st, 10)
				cfg := Config{Service: &Service{Store: st}, Mode: LockRedis, Locker: locker, Wait: 5 * time.Second}
				if traced {
					cfg.Tracer = tp.Tracer("test")
				}

				// The test holds the order's lock, under a span of its own.
				holderCtx, holder := tp.Tracer("test").Start(context.Background(), "holder")
				lease, err := locker.Lock(holderCtx, OrderKey(user, testVoucher), core.WithPattern("holder"))
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					// Released once the order waits in the queue (or the
					// test's bound passed: the link check then fails).
					wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					events.Wait(wctx, locktest.Is(core.EventWaiting, OrderKey(user, testVoucher)))
					lease.Unlock(context.Background())
				}()
				holder.End()

				traceparent := "00-" + traceID + "-" + callerSpan + "-01"
				switch c.entry {
				case "connect":
					req := connect.NewRequest(&seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher})
					req.Header().Set("traceparent", traceparent)
					if _, err := connectClients(t, serveConnectTest(t, cfg))["connect"].Order(context.Background(), req); err != nil {
						t.Fatalf("order: %v", err)
					}
				case "grpc":
					conn := serveGRPCTest(t, cfg)
					ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent)
					if _, err := seckillv1.NewSeckillClient(conn).Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher}); err != nil {
						t.Fatalf("order: %v", err)
					}
				default:
					url := serveHTTP(t, cfg, c.entry)
					req, _ := http.NewRequest(http.MethodPost, url+"/voucher-order/seckill/1?user_id=90817263", nil)
					req.Header.Set("traceparent", traceparent)
					hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
					resp, err := hc.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("order: %s", resp.Status)
					}
				}

				spans := map[string]sdktrace.ReadOnlySpan{}
				for _, s := range rec.Ended() {
					spans[s.Name()] = s
					for _, a := range s.Attributes() {
						if strings.Contains(s.Name()+a.Value.String(), "90817263") {
							t.Errorf("span %q carries the user id: %v", s.Name(), a)
						}
					}
				}
				if !traced {
					delete(spans, "holder")
					delete(spans, "lock holder") // the test's own Lock, inside its span
					if len(spans) != 0 {
						t.Errorf("without Tracer: spans %v, want none", keys(spans))
					}
					return
				}
				server, lock := spans[c.serverSpan], spans[c.lockSpan]
				if server == nil || lock == nil {
					t.Fatalf("spans %v, want %q and %q", keys(spans), c.serverSpan, c.lockSpan)
				}
				if server.SpanKind() != trace.SpanKindServer {
					t.Errorf("server span kind %v", server.SpanKind())
				}
				if server.SpanContext().TraceID().String() != traceID || server.Parent().SpanID().String() != callerSpan {
					t.Errorf("server span: trace %s parent %s, want the caller's %s %s",
						server.SpanContext().TraceID(), server.Parent().SpanID(), traceID, callerSpan)
				}
				if lock.Parent().SpanID() != server.SpanContext().SpanID() {
					t.Errorf("lock span's parent %s, want the server span %s", lock.Parent().SpanID(), server.SpanContext().SpanID())
				}
				links := lock.Links()
				if len(links) != 1 || links[0].SpanContext.SpanID() != holder.SpanContext().SpanID() {
					t.Errorf("lock span links %v, want one to the holder's span %s", links, holder.SpanContext().SpanID())
				}
			})
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
