package otellock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	otellock "github.com/lockgate/lockgate/otel"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// rig is an Observer on a real SDK: a manual metric reader and an in-memory
// span exporter.
type rig struct {
	obs    *otellock.Observer
	events locktest.Events // every Locker's events too: the signals tests wait on
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
}

func newRig(t testing.TB) *rig {
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		r.tp.Shutdown(context.Background())
	})
	obs, err := otellock.New(otellock.WithMeterProvider(mp), otellock.WithTracerProvider(r.tp))
	if err != nil {
		t.Fatal(err)
	}
	r.obs = obs
	return r
}

// locker is a Locker on c with the rig's observer, closed at cleanup.
func (r *rig) locker(t testing.TB, c redis.UniversalClient, opts ...core.Option) *core.Locker {
	base := []core.Option{core.WithObserver(locktest.Observers(r.obs, &r.events)), core.WithHolderTag(r.obs.HolderTag)}
	return locktest.Locker(t, c, append(base, opts...)...)
}

// metrics collects every metric by name.
func (r *rig) metrics(t testing.TB) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// value is the sum (counters, up-down counters), the count (histograms)
// or the last value (gauges) of the point of name whose attributes include
// want (key=value pairs); ok false when there is none.
func (r *rig) value(t testing.TB, name string, want ...string) (float64, bool) {
	m, ok := r.metrics(t)[name]
	if !ok {
		return 0, false
	}
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if got, ok := set.Value(attribute.Key(k)); !ok || got.String() != v {
				return false
			}
		}
		return true
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Value), true
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Count), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return p.Value, true
			}
		}
	}
	return 0, false
}

// count is value, 0 when the point does not exist.
func (r *rig) count(t testing.TB, name string, want ...string) int {
	v, _ := r.value(t, name, want...)
	return int(v)
}

// attributes lists every attribute value of every metric point and span
// (and every span name).
func (r *rig) attributes(t testing.TB) []string {
	var out []string
	add := func(set attribute.Set) {
		for _, kv := range set.ToSlice() {
			out = append(out, string(kv.Key)+"="+kv.Value.String())
		}
	}
	for _, m := range r.metrics(t) {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				add(p.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				add(p.Attributes)
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				add(p.Attributes)
			}
		}
	}
	for _, s := range r.spans.GetSpans() {
		out = append(out, "span="+s.Name)
		add(attribute.NewSet(s.Attributes...))
	}
	return out
}

// within fails the test if ch does not close within d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
}

// event waits (at most 10s) for the first event of any of the rig's
// Lockers that match accepts.
func (r *rig) event(t *testing.T, what string, match func(core.Event) bool) core.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, ok := r.events.Wait(ctx, match)
	if !ok {
		t.Fatalf("%s did not happen within 10s", what)
	}
	return e
}
