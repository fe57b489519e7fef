package otellock

import (
	"context"
	"sync"

	"github.com/lockgate/lockgate/core"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/lockgate/lockgate/otel"

// Observer is a core.Observer that records lockgate's events as
// OpenTelemetry metrics and spans (see the package doc for each). It is
// safe for concurrent use; give it to one or more Lockers with Options.
type Observer struct {
	tracer trace.Tracer

	acquire  metric.Float64Histogram
	hold     metric.Float64Histogram
	held     metric.Int64UpDownCounter
	waiters  metric.Int64UpDownCounter
	renewals metric.Int64Counter
	lost     metric.Int64Counter
	releases metric.Int64Counter
	offset   metric.Float64Gauge

	// sets caches the attribute sets of each (pattern, outcome), so that an
	// event allocates nothing once its set was seen.
	sets sync.Map // attrKey → *attrs
}

type attrKey struct{ pattern, name, value string }

// attrs is one attribute set, ready to pass to an instrument.
type attrs struct {
	spanName string // "lock <pattern>"
	set      attribute.Set
	add      []metric.AddOption
	record   []metric.RecordOption
}

// New creates the Observer and its instruments. Errors: an instrument
// the MeterProvider refuses.
func New(opts ...Option) (*Observer, error) {
	c := config{buckets: DefaultDurationBuckets}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	var errs [8]error
	o.acquire, errs[0] = m.Float64Histogram("lockgate.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time spent in Lock and TryLock, by pattern and outcome."),
		metric.WithExplicitBucketBoundaries(c.buckets...))
	o.hold, errs[1] = m.Float64Histogram("lockgate.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long locks were held, from acquisition to release or loss, by pattern."),
		metric.WithExplicitBucketBoundaries(c.buckets...))
	o.held, errs[2] = m.Int64UpDownCounter("lockgate.lock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by this process now, by pattern."))
	o.waiters, errs[3] = m.Int64UpDownCounter("lockgate.lock.waiters", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls of this process waiting in a lock's queue now, by pattern."))
	o.renewals, errs[4] = m.Int64Counter("lockgate.lock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog renewals, by pattern and outcome (ok, failed, lost)."))
	o.lost, errs[5] = m.Int64Counter("lockgate.lock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Leases lost while held, by pattern and reason (not_held, expired, closed)."))
	o.releases, errs[6] = m.Int64Counter("lockgate.lock.releases", metric.WithUnit("{release}"),
		metric.WithDescription("Releases sent to Redis, by pattern and outcome (ok, not_held, failed)."))
	o.offset, errs[7] = m.Float64Gauge("lockgate.redis.clock.offset", metric.WithUnit("s"),
		metric.WithDescription("The Redis server's clock minus the local clock, from the last fresh acquisition (error at most half its round trip)."))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Options returns the Locker options that connect o: core.WithObserver(o)
// and core.WithHolderTag(o.HolderTag), which stores the caller's trace
// context with each lock so that waiters' spans link to the holder's.
func (o *Observer) Options() []core.Option {
	return []core.Option{core.WithObserver(o), core.WithHolderTag(o.HolderTag)}
}

// attrs returns the cached attribute set {pattern, name: value} (name ""
// for the set of the pattern alone).
func (o *Observer) attrs(pattern, name, value string) *attrs {
	k := attrKey{pattern, name, value}
	if a, ok := o.sets.Load(k); ok {
		return a.(*attrs)
	}
	kv := []attribute.KeyValue{attribute.String("pattern", pattern)}
	if name != "" {
		kv = append(kv, attribute.String(name, value))
	}
	a := &attrs{spanName: "lock " + pattern, set: attribute.NewSet(kv...)}
	opt := metric.WithAttributeSet(a.set)
	a.add, a.record = []metric.AddOption{opt}, []metric.RecordOption{opt}
	v, _ := o.sets.LoadOrStore(k, a)
	return v.(*attrs)
}

// Observe records e (core.Observer).
func (o *Observer) Observe(ctx context.Context, e core.Event) {
	switch e.Kind {
	case core.EventAcquired, core.EventNotObtained:
		outcome := acquireOutcome(e)
		o.acquire.Record(ctx, e.Wait.Seconds(), o.attrs(e.Pattern, "outcome", outcome).record...)
		if e.Waited {
			o.waiters.Add(ctx, -1, o.attrs(e.Pattern, "", "").add...)
		}
		if e.Kind == core.EventAcquired && !e.Reentrant {
			o.held.Add(ctx, 1, o.attrs(e.Pattern, "", "").add...)
		}
		if e.ClockSampled {
			o.offset.Record(ctx, e.ClockOffset.Seconds())
		}
		o.span(ctx, e, outcome)
	case core.EventWaiting:
		o.waiters.Add(ctx, 1, o.attrs(e.Pattern, "", "").add...)
	case core.EventReleased:
		if e.Reentrant {
			return // a re-entry's Unlock releases nothing in Redis
		}
		o.releases.Add(ctx, 1, o.attrs(e.Pattern, "outcome", releaseOutcome(e.Err)).add...)
		if !e.Retry {
			o.ended(ctx, e)
		}
	case core.EventRenewed:
		outcome := "ok"
		if e.Err != nil {
			outcome = "failed"
		}
		o.renewals.Add(ctx, 1, o.attrs(e.Pattern, "outcome", outcome).add...)
	case core.EventLost:
		reason := lostReason(e.Err)
		o.lost.Add(ctx, 1, o.attrs(e.Pattern, "reason", reason).add...)
		if reason == "not_held" {
			o.renewals.Add(ctx, 1, o.attrs(e.Pattern, "outcome", "lost").add...)
		}
		o.ended(ctx, e)
	}
}

// ended records the end of a hold: released (the first time) or lost.
func (o *Observer) ended(ctx context.Context, e core.Event) {
	a := o.attrs(e.Pattern, "", "")
	o.held.Add(ctx, -1, a.add...)
	o.hold.Record(ctx, e.Held.Seconds(), a.record...)
}

var _ core.Observer = (*Observer)(nil)
