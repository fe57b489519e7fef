package locktest

import (
	"context"
	"sync"

	"github.com/lockgate/lockgate/core"
)

// Events is a core.Observer that records every event and lets a test wait
// for one: the signal that a Lock is waiting in the queue, gave up, or that
// a release finished, where a test would otherwise sleep. The zero value is
// ready to use.
type Events struct {
	mu      sync.Mutex
	seen    []core.Event
	changed chan struct{} // closed and replaced on every event
}

// Observe records e and wakes the waiters.
func (r *Events) Observe(_ context.Context, e core.Event) {
	r.mu.Lock()
	r.seen = append(r.seen, e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	r.mu.Unlock()
}

// Wait returns the first recorded event (since the Locker started) for
// which match is true, waiting for it until ctx ends; false if ctx ended
// first.
func (r *Events) Wait(ctx context.Context, match func(core.Event) bool) (core.Event, bool) {
	next := 0
	for {
		r.mu.Lock()
		for ; next < len(r.seen); next++ {
			if e := r.seen[next]; match(e) {
				r.mu.Unlock()
				return e, true
			}
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return core.Event{}, false
		}
	}
}

// All returns the events recorded so far.
func (r *Events) All() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Event(nil), r.seen...)
}

// Is matches an event of kind for the lock named key.
func Is(kind core.EventKind, key string) func(core.Event) bool {
	return func(e core.Event) bool { return e.Kind == kind && e.Key == key }
}

// Observers tells every one of obs of each event.
func Observers(obs ...core.Observer) core.Observer {
	return core.ObserverFunc(func(ctx context.Context, e core.Event) {
		for _, o := range obs {
			o.Observe(ctx, e)
		}
	})
}
