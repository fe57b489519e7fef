package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

type deadlineTestKey struct{}

// A bounded call's shared deadline: it ends at its slot's start, at most
// deadlineSlot before the deadline asked for and never after it, keeps its
// parent's values, shares its channel with the calls of its slot, and
// cancels contexts derived from it as a context.WithDeadline would.
func TestCallDeadline(t *testing.T) {
	t.Parallel()
	parent := context.WithValue(context.Background(), deadlineTestKey{}, "v")
	want := time.Now().Add(50 * time.Millisecond)
	ctx := sharedCtx(t, parent, want)
	same := sharedCtx(t, parent, want)
	later := sharedCtx(t, parent, want.Add(2*deadlineSlot))
	// far: a slot that cannot have ended by the checks after ctx's end, on a
	// loaded machine too (later's may have: it ends 2 slots after ctx's)
	far := sharedCtx(t, parent, want.Add(3*time.Second))

	got, ok := ctx.Deadline()
	if !ok || got.After(want) || !got.After(want.Add(-deadlineSlot)) {
		t.Fatalf("Deadline() = %v, %v: want in (%v, %v]", got, ok, want.Add(-deadlineSlot), want)
	}
	if ctx.Done() != same.Done() || ctx.Done() == later.Done() {
		t.Fatal("calls of one slot do not share a channel, or calls of two slots do")
	}
	if ctx.Value(deadlineTestKey{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := false
	stop := context.AfterFunc(ctx, func() { stopped = true })
	if ctx.Err() != nil || child.Err() != nil {
		t.Fatalf("ended before its deadline: %v, %v", ctx.Err(), child.Err())
	}
	if !stop() {
		t.Fatal("an AfterFunc could not be stopped before the deadline")
	}
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })

	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not ended 5s after its deadline")
	}
	if time.Now().Before(got) {
		t.Fatalf("ended at %v, before its deadline %v", time.Now(), got)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Err %v, Cause %v: want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a derived context did not end with it")
	}
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived context's Err %v, want DeadlineExceeded", child.Err())
	}
	<-ran
	if stopped {
		t.Fatal("a stopped AfterFunc ran")
	}
	if far.Err() != nil {
		t.Fatal("a later slot's call ended with an earlier slot")
	}
}

// sharedCtx is callDeadlines.ctx for a deadline within the horizon.
func sharedCtx(t *testing.T, parent context.Context, deadline time.Time) context.Context {
	t.Helper()
	ctx, ok := callDeadlines.ctx(parent, deadline)
	if !ok {
		t.Fatalf("no shared deadline %v ahead", time.Until(deadline))
	}
	return ctx
}

// A deadline past (or within a slot) has ended already, and takes no slot,
// so a call never reaches a connection with a deadline in the past; one
// beyond the horizon gets none (the caller makes a context of its own); one
// read without a monotonic clock (time.Unix) ends when it says.
func TestCallDeadlineEdges(t *testing.T) {
	before := callDeadlines.slots()
	for _, past := range []time.Duration{-time.Hour, -time.Millisecond, deadlineSlot / 2} {
		ctx := sharedCtx(t, context.Background(), time.Now().Add(past))
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("deadline %v from now: Err %v, want DeadlineExceeded at once", past, ctx.Err())
		}
	}
	if _, ok := callDeadlines.ctx(context.Background(), time.Now().Add(sharedHorizon+time.Second)); ok {
		t.Fatal("a deadline beyond the horizon got a shared channel")
	}
	if n := callDeadlines.slots(); n > before { // slots of other tests only end meanwhile
		t.Fatalf("slots %d, more than the %d before: a past or far deadline took one", n, before)
	}
	wall := time.Unix(0, time.Now().Add(100*time.Millisecond).UnixNano()) // no monotonic reading
	ctx := sharedCtx(t, context.Background(), wall)
	start := time.Now()
	<-ctx.Done()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a deadline 100ms away without a monotonic reading ended after %v", took)
	}
	if d, _ := ctx.Deadline(); d.After(wall) {
		t.Fatalf("Deadline %v after the one asked, %v", d, wall)
	}
}

// slots is how many slots are live, for tests.
func (d *deadlines) slots() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.chans)
}
