package core

import (
	"sync/atomic"
	"time"
)

// holdTimes is the mean hold time of this Locker's releases: exponentially
// weighted (1/8 for the newest), in nanoseconds.
type holdTimes struct{ mean atomic.Int64 }

func (t *holdTimes) observe(d time.Duration) {
	if d <= 0 {
		d = 1
	}
	for {
		old := t.mean.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if t.mean.CompareAndSwap(old, next) {
			return
		}
	}
}

// hint is BusyError.RetryAfter for a holder with holderTTL left: the mean
// hold time capped at holderTTL; before any release, holderTTL or 1s.
func (t *holdTimes) hint(holderTTL time.Duration) time.Duration {
	h := time.Duration(t.mean.Load())
	if holderTTL > 0 && (h <= 0 || h > holderTTL) {
		return holderTTL
	}
	if h <= 0 {
		return time.Second
	}
	return h
}
