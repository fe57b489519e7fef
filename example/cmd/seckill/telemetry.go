package main

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgate/lockgate/core"
	otellock "github.com/lockgate/lockgate/otel"
)

// telemetry is the OpenTelemetry wiring of `seckill serve`: lockgate's
// observer records into a MeterProvider read by the Prometheus exporter,
// which a private registry serves at /metrics; with -trace-stdout each
// order runs in a server span (seckill.Config.Tracer) and the spans, the
// order's and its lock's (otellock makes one only inside a recording
// span), go to stdout, one JSON object a line.
type telemetry struct {
	// metrics serves the registry in the Prometheus text format.
	metrics http.Handler
	// lockOptions connect a Locker to the observer (core.WithObserver and
	// core.WithHolderTag).
	lockOptions []core.Option
	// tracer makes the orders' server spans; nil without -trace-stdout.
	tracer trace.Tracer

	mp *sdkmetric.MeterProvider
	tp *sdktrace.TracerProvider // nil without -trace-stdout
}

// newTelemetry builds the providers. traceOut, when not nil, receives the
// spans (a syncer: each span is written when it ends, which suits a demo,
// not a busy service); when nil no TracerProvider is installed: no server
// span is made, and the observer's tracer is the global one, a no-op
// unless someone set it.
func newTelemetry(traceOut io.Writer) (*telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "seckill")))
	if err != nil {
		return nil, err
	}
	// A private registry: only what this node's MeterProvider records,
	// nothing another package registered on prometheus.DefaultRegisterer.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	t := &telemetry{
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		mp:      sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res)),
	}
	opts := []otellock.Option{otellock.WithMeterProvider(t.mp)}
	if traceOut != nil {
		se, err := stdouttrace.New(stdouttrace.WithWriter(traceOut))
		if err != nil {
			t.mp.Shutdown(context.Background())
			return nil, err
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(se), sdktrace.WithResource(res))
		opts = append(opts, otellock.WithTracerProvider(t.tp))
		t.tracer = t.tp.Tracer("github.com/lockgate/lockgate/example/seckill")
	}
	obs, err := otellock.New(opts...)
	if err != nil {
		t.shutdown(context.Background())
		return nil, err
	}
	t.lockOptions = obs.Options()
	return t, nil
}

// shutdown flushes and stops the providers; call it after the Locker's
// Shutdown, whose releases are observed too.
func (t *telemetry) shutdown(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	errs = append(errs, t.mp.Shutdown(ctx))
	return errors.Join(errs...)
}
