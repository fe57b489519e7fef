package core

import (
	"context"
	"sync"
	"time"
)

const (
	// deadlineSlot is the precision of a shared deadline: calls whose
	// deadlines fall in one slot share the channel that closes at its start.
	deadlineSlot = 5 * time.Millisecond
	// sharedHorizon: a deadline further off gets a context.WithDeadline,
	// freed when its call returns, rather than a slot kept until it starts.
	sharedHorizon = 5 * time.Second
)

// callDeadlines hands out those channels, for every Locker of the process.
var callDeadlines = deadlines{epoch: time.Now(), chans: map[int64]chan struct{}{}}

// closedChan is the Done channel of a call whose deadline has passed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// deadlines is a set of channels, each closed when its slot starts: a
// timer and a channel for many calls instead of a context.WithDeadline
// (a context, a timer and a channel) each.
type deadlines struct {
	epoch time.Time // slots count from here, on the monotonic clock
	mu    sync.Mutex
	chans map[int64]chan struct{}
}

// ctx returns a context with parent's values (not its cancellation) that
// ends at deadline, or up to deadlineSlot before it; false, and no
// context, for a deadline more than sharedHorizon away.
func (d *deadlines) ctx(parent context.Context, deadline time.Time) (context.Context, bool) {
	left := time.Until(deadline) // relative, as context.WithDeadline: any clock reading will do
	switch {
	case left > sharedHorizon:
		return nil, false
	case left <= deadlineSlot:
		// Ends within the slot (or has): now, so a call never reaches
		// the connection with a deadline in the past.
		return &callCtx{Context: parent, deadline: time.Now(), done: closedChan}, true
	}
	now := time.Since(d.epoch)
	slot := int64((now + left) / deadlineSlot) // positive: rounds down
	at := d.epoch.Add(time.Duration(slot) * deadlineSlot)
	d.mu.Lock()
	ch, ok := d.chans[slot]
	if !ok {
		ch = make(chan struct{})
		d.chans[slot] = ch
		time.AfterFunc(time.Until(at), func() {
			d.mu.Lock()
			delete(d.chans, slot)
			d.mu.Unlock()
			close(ch)
		})
	}
	d.mu.Unlock()
	return &callCtx{Context: parent, deadline: at, done: ch}, true
}

// callCtx is a bounded call's context: it ends when done closes, at deadline.
type callCtx struct {
	context.Context
	deadline time.Time
	done     <-chan struct{}
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }

// AfterFunc runs f once the context has ended, so that contexts derived
// directly from it need no goroutine to follow it (see context.AfterFunc).
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	return time.AfterFunc(time.Until(c.deadline), func() { <-c.done; f() }).Stop
}

func (c *callCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
