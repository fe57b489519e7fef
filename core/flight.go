package core

import (
	"sync/atomic"
)

// flight is one call to Redis that its caller may stop waiting for. go-redis
// only gives up on a command after its own timeouts and retries (with its
// defaults, seconds), so a caller whose budget is shorter waits for the
// flight instead, and leaves a late result to orphan, which undoes whatever
// the call did. The goroutine is tracked by the Locker: Close waits for it.
type flight[T any] struct {
	done   chan struct{}
	res    T
	err    error
	state  atomic.Int32 // flightRunning, flightDelivered, flightOrphaned
	orphan func(T, error)
}

const (
	flightRunning int32 = iota
	flightDelivered
	flightOrphaned
)

// startFlight runs call on a goroutine of l. orphan (may be nil) receives
// the result if the caller stopped waiting first. It returns nil, running
// nothing, once l is closed.
func startFlight[T any](l *Locker, call func() (T, error), orphan func(T, error)) *flight[T] {
	f := &flight[T]{done: make(chan struct{}), orphan: orphan}
	if !l.goBackground(func() {
		f.res, f.err = call()
		if !f.state.CompareAndSwap(flightRunning, flightDelivered) && f.orphan != nil {
			f.orphan(f.res, f.err)
		}
		close(f.done)
	}) {
		return nil
	}
	return f
}

// giveUp stops waiting: the result goes to orphan, unless it has just
// arrived, in which case it is returned with ok true.
func (f *flight[T]) giveUp() (res T, err error, ok bool) {
	if f.state.CompareAndSwap(flightRunning, flightOrphaned) {
		return res, nil, false
	}
	<-f.done // delivered meanwhile
	return f.res, f.err, true
}
