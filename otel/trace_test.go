package otellock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	otellock "github.com/lockgate/lockgate/otel"
	"github.com/lockgate/lockgate/redistest"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The waiter's lock span is a child of its request's span and links to the
// holder's request span, carried through Redis with the lock; Inspect shows
// the holder's trace id. Control: a holder whose request is not traced
// stores nothing, and the waiter's span has no link.
func TestWaiterSpanLinksToTheHolder(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	holder := r.locker(t, srv.Client(t))
	waiter := r.locker(t, srv.Client(t))
	tracer := r.tp.Tracer("test")
	ctx := locktest.Context(t)

	for _, traced := range []bool{true, false} {
		key := "order:1:7" // a key per round: the round's waiter is the one waited for
		if !traced {
			key = "order:2:7"
		}
		r.spans.Reset()
		hctx := ctx
		var hspan trace.Span
		if traced {
			hctx, hspan = tracer.Start(ctx, "request A")
		}
		s, err := holder.Lock(hctx, key, core.WithPattern(pattern))
		if err != nil {
			t.Fatal(err)
		}
		info, err := holder.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if traced && otellock.TraceID(info.HolderTag) != hspan.SpanContext().TraceID().String() {
			t.Errorf("Inspect shows tag %q, want the holder's trace id %s", info.HolderTag, hspan.SpanContext().TraceID())
		}
		if !traced && info.HolderTag != "" {
			t.Errorf("an untraced holder stored tag %q", info.HolderTag)
		}
		wctx, wspan := tracer.Start(ctx, "request B")
		got := make(chan error, 1)
		go func() {
			w, err := waiter.Lock(wctx, key, core.WithPattern(pattern), core.WithWait(10*time.Second))
			if err == nil {
				w.Unlock(ctx)
			}
			got <- err
		}()
		r.event(t, "a waiter", locktest.Is(core.EventWaiting, key))
		unlocked := time.Now()
		s.Unlock(ctx)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		wspan.End()
		if hspan != nil {
			hspan.End()
		}
		ls := lockSpan(r.spans.GetSpans(), wspan.SpanContext().SpanID())
		if ls == nil {
			t.Fatal("no lock span under the waiter's request span")
		}
		// The span covers the wait: it began before the holder let go and
		// ended after.
		if ls.Name != "lock "+pattern || !ls.StartTime.Before(unlocked) || !ls.EndTime.After(unlocked) {
			t.Errorf("lock span %q from %v to %v, want it to span the holder's Unlock at %v", ls.Name, ls.StartTime, ls.EndTime, unlocked)
		}
		switch {
		case traced && (len(ls.Links) != 1 || ls.Links[0].SpanContext.SpanID() != hspan.SpanContext().SpanID()):
			t.Errorf("the waiter's span links %+v, want the holder's span %s", ls.Links, hspan.SpanContext().SpanID())
		case !traced && len(ls.Links) != 0:
			t.Errorf("an untraced holder, yet the waiter's span links %+v", ls.Links)
		}
	}
}

// A Semaphore's span says it is one: attribute lockgate.permits, the count;
// a Lock's span has none.
func TestSemaphoreSpanCarriesPermits(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	l := r.locker(t, srv.Client(t))
	ctx := locktest.Context(t)
	for _, permits := range []int{3, 0} {
		r.spans.Reset()
		rctx, rspan := r.tp.Tracer("test").Start(ctx, "request")
		var s *core.Lease
		var err error
		if permits > 0 {
			s, err = l.Semaphore(rctx, "export:7", permits, core.WithPattern(pattern))
		} else {
			s, err = l.Lock(rctx, "export:7", core.WithPattern(pattern))
		}
		if err != nil {
			t.Fatal(err)
		}
		s.Unlock(ctx)
		rspan.End()
		ls := lockSpan(r.spans.GetSpans(), rspan.SpanContext().SpanID())
		if ls == nil {
			t.Fatal("no lock span under the request span")
		}
		got := -1
		for _, kv := range ls.Attributes {
			if kv.Key == "lockgate.permits" {
				got = int(kv.Value.AsInt64())
			}
		}
		if want := map[bool]int{true: permits, false: -1}[permits > 0]; got != want {
			t.Errorf("permits %d: span attribute lockgate.permits %d, want %d (-1: absent)", permits, got, want)
		}
	}
}

// lockSpan is the span named "lock ..." whose parent is parent.
func lockSpan(spans tracetest.SpanStubs, parent trace.SpanID) *tracetest.SpanStub {
	for i, s := range spans {
		if s.Parent.SpanID() == parent && len(s.Name) > 5 && s.Name[:5] == "lock " {
			return &spans[i]
		}
	}
	return nil
}

// HolderTag writes what TraceID and the span link read: a W3C traceparent.
func TestHolderTagIsATraceParent(t *testing.T) {
	r := newRig(t)
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	tag := r.obs.HolderTag(ctx)
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if tag != want {
		t.Errorf("HolderTag = %q, want %q", tag, want)
	}
	if otellock.TraceID(tag) != sc.TraceID().String() || otellock.TraceID("garbage") != "" {
		t.Errorf("TraceID does not read back the tag")
	}
	if r.obs.HolderTag(context.Background()) != "" {
		t.Errorf("a context without a span has a tag")
	}
}

// A read lock's span says it is one: attribute lockgate.read; a Lock's span
// has none.
func TestReadSpanSaysRead(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	l := r.locker(t, srv.Client(t))
	ctx := locktest.Context(t)
	for _, read := range []bool{true, false} {
		r.spans.Reset()
		rctx, rspan := r.tp.Tracer("test").Start(ctx, "request")
		take := l.Lock
		if read {
			take = l.RLock
		}
		s, err := take(rctx, "voucher:7", core.WithPattern(pattern))
		if err != nil {
			t.Fatal(err)
		}
		s.Unlock(ctx)
		rspan.End()
		ls := lockSpan(r.spans.GetSpans(), rspan.SpanContext().SpanID())
		if ls == nil {
			t.Fatal("no lock span under the request span")
		}
		got := false
		for _, kv := range ls.Attributes {
			if kv.Key == "lockgate.read" {
				got = kv.Value.AsBool()
			}
		}
		if got != read {
			t.Errorf("RLock %v: span attribute lockgate.read %v", read, got)
		}
	}
}
