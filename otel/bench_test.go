package otellock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	otellock "github.com/lockgate/lockgate/otel"
	"github.com/lockgate/lockgate/redistest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// benchMode is one way of running the uncontended Lock+Unlock cycle.
type benchMode struct {
	name   string
	l      *core.Locker
	tracer trace.Tracer // non-nil: each cycle runs inside a recording request span
	total  time.Duration
}

// BenchmarkObserverCost times the uncontended Lock+Unlock cycle on one
// local Redis three ways, in turn within every iteration (the order
// rotating), so that the machine's noise falls on all three alike: none
// (no observer), metrics (this module on a real SDK MeterProvider with a
// manual reader, and an SDK TracerProvider; the call is not in a traced
// request), traced (the same, each call inside a recording request span,
// so a lock span is recorded and exported). It reports ns per cycle of
// each and the ratios to none: the target is metrics within 5%.
func BenchmarkObserverCost(b *testing.B) {
	srv := redistest.Start(b) // b.Loop: the function runs once per -count
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	obs, err := otellock.New(otellock.WithMeterProvider(mp), otellock.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	modes := []*benchMode{{name: "none"}, {name: "metrics"}, {name: "traced", tracer: tp.Tracer("bench")}}
	for _, m := range modes {
		var opts []core.Option
		if m.name != "none" {
			opts = obs.Options()
		}
		m.l, err = core.New(srv.Client(b), opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer m.l.Close()
	}
	p := core.WithPattern("bench:{n}")
	cycle := func(m *benchMode, i int) {
		ctx := context.Background()
		var span trace.Span
		if m.tracer != nil {
			ctx, span = m.tracer.Start(ctx, "request")
		}
		start := time.Now()
		s, err := m.l.Lock(ctx, "bench:"+m.name+":"+strconv.Itoa(i), p)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		m.total += time.Since(start)
		if span != nil {
			span.End()
		}
	}
	n := 0
	for b.Loop() {
		for j := range modes {
			cycle(modes[(n+j)%len(modes)], n)
		}
		n++
	}
	for _, m := range modes {
		b.ReportMetric(float64(m.total.Nanoseconds())/float64(n), m.name+"-ns/cycle")
	}
	for _, m := range modes[1:] {
		b.ReportMetric(float64(m.total)/float64(modes[0].total), m.name+"/none")
	}
}

// BenchmarkLockUnlock is the cycle alone, for allocation counts: without
// an observer, and with this module (untraced call).
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b) // b.Loop: the function runs once per -count
	for _, mode := range []string{"none", "metrics"} {
		b.Run(mode, func(b *testing.B) {
			var opts []core.Option
			if mode == "metrics" {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				obs, err := otellock.New(otellock.WithMeterProvider(mp))
				if err != nil {
					b.Fatal(err)
				}
				opts = obs.Options()
			}
			l, err := core.New(srv.Client(b), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			p := core.WithPattern("bench:{n}")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s, err := l.Lock(ctx, "bench:"+mode+":"+strconv.Itoa(i), p)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
