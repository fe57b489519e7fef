package otellock

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures New.
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	buckets []float64
}

// WithMeterProvider sets where the metrics go. Default: the global
// MeterProvider (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where the spans go. Default: the global
// TracerProvider (otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithDurationBuckets sets the bucket boundaries (seconds) of the two
// duration histograms. Default DefaultDurationBuckets.
func WithDurationBuckets(b ...float64) Option {
	return func(c *config) { c.buckets = b }
}

// DefaultDurationBuckets are the histograms' boundaries in seconds: from
// half a millisecond (an uncontended Lock is one round trip) to a minute
// (a long hold), denser where lock waits usually fall.
var DefaultDurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
