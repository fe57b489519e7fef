package core

import (
	"sync/atomic"
)

// flight is one call to Redis on a goroutine of the Locker (Close waits for
// it), which its caller may stop waiting for; a late result goes to orphan,
// which undoes the call. See docs/internals.md, "Bounded calls".
type flight[T any] struct {
	done  chan struct{}
	res   T
	err   error
	state atomic.Int32 // flightRunning, flightDelivered, flightOrphaned
}

const (
	flightRunning int32 = iota
	flightDelivered
	flightOrphaned
)

// startFlight runs call on a goroutine of l; orphan (may be nil) gets the
// result if the caller gave up first. nil, running nothing, once l is closed.
func startFlight[T any](l *Locker, call func() (T, error), orphan func(T, error)) *flight[T] {
	f := &flight[T]{done: make(chan struct{})}
	if !l.goBackground(func() {
		f.res, f.err = call()
		if !f.state.CompareAndSwap(flightRunning, flightDelivered) && orphan != nil {
			orphan(f.res, f.err)
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
