package otellock

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/traceparent"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// span records one Lock or TryLock call of a traced request (ctx holds a
// recording span) as a span "lock <pattern>" from the call's start to its
// end, a child of ctx's span, linked to the holder's span when the lock was
// found busy and the holder had stored its trace context (HolderTag).
func (o *Observer) span(ctx context.Context, e core.Event, outcome string) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return // an untraced call: no root span of its own, and no cost
	}
	end := time.Now()
	_, s := o.tracer.Start(ctx, o.attrs(e.Pattern, "", "").spanName, trace.WithTimestamp(end.Add(-e.Wait)))
	s.SetAttributes(
		attribute.String("lockgate.pattern", e.Pattern),
		attribute.String("lockgate.outcome", outcome),
		attribute.Int("lockgate.attempts", e.Attempts),
		attribute.Bool("lockgate.waited", e.Waited),
	)
	if e.Permits > 0 {
		s.SetAttributes(attribute.Int("lockgate.permits", e.Permits)) // a Semaphore's permit
	}
	if e.Read {
		s.SetAttributes(attribute.Bool("lockgate.read", true)) // an RLock's shared hold
	}
	if sc, ok := parseTraceParent(e.HolderTag); ok {
		s.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("lockgate.link", "holder")}})
	}
	if e.Err == nil {
		s.SetAttributes(attribute.Int64("lockgate.fence", e.Fence))
	} else {
		if outcome == OutcomeUnavailable || outcome == OutcomeInvalid {
			s.SetStatus(codes.Error, outcome)
		}
		s.SetAttributes(attribute.String("error.type", outcome))
	}
	s.End(trace.WithTimestamp(end))
}

// HolderTag returns the W3C traceparent of ctx's span
// ("00-<trace id>-<span id>-<flags>"), or "" when ctx holds no sampled
// span: then nothing is stored with the lock. Give it to
// core.WithHolderTag (Options does).
func (o *Observer) HolderTag(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	var b [55]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// parseTraceParent reads a traceparent (traceparent.Parse: the reading
// cmd/lockgate shows) as a remote span context.
func parseTraceParent(s string) (trace.SpanContext, bool) {
	id, span, fl, ok := traceparent.Parse(s)
	if !ok {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(id)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(span)
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(fl)); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// TraceID returns the trace id of a holder tag written by HolderTag (as
// Inspect shows it), or "" when tag is not one.
func TraceID(tag string) string {
	sc, ok := parseTraceParent(tag)
	if !ok {
		return ""
	}
	return sc.TraceID().String()
}
