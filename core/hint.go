package core

import (
	"sync/atomic"
	"time"
)

// defaultHint is the retry hint of a Locker that has not released a lock
// yet: it has no hold time to go by.
const defaultHint = time.Second

// holdTimes estimates how long a lock is held from the hold times of this
// Locker's own releases: an exponentially weighted mean (weight 1/8 for the
// newest), kept in nanoseconds.
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
// hold time, at most holderTTL; before any release of its own the Locker
// has nothing to go by but the holder's TTL (defaultHint when unknown).
func (t *holdTimes) hint(holderTTL time.Duration) time.Duration {
	h := time.Duration(t.mean.Load())
	if h <= 0 {
		h = defaultHint
		if holderTTL > 0 {
			h = holderTTL
		}
	}
	if holderTTL > 0 && h > holderTTL {
		h = holderTTL
	}
	return h
}
