package core

import (
	"math/rand/v2"
	"time"
)

// RetryStrategy tells a waiting Lock how long to sleep after a failed attempt
// when no release notification arrives first. NextBackoff is called once per
// failed attempt of one Lock call; a value <= 0 means "do not retry on a
// timer" (wait for a notification or the holder's TTL only). The sleep is
// always capped by the holder's remaining TTL and by the wait budget, so a
// lost notification never stalls a waiter beyond the holder's TTL.
type RetryStrategy interface {
	NextBackoff() time.Duration
}

// RetryFactory builds a fresh RetryStrategy for each Lock call, so that
// stateful strategies (exponential) start over every time.
type RetryFactory func() RetryStrategy

// NoRetry never retries on a timer: a waiter is woken only by a release
// notification or when the holder's TTL runs out.
func NoRetry() RetryFactory {
	return func() RetryStrategy { return noRetry{} }
}

type noRetry struct{}

func (noRetry) NextBackoff() time.Duration { return 0 }

// LinearBackoff retries every d.
func LinearBackoff(d time.Duration) RetryFactory {
	return func() RetryStrategy { return linear(d) }
}

type linear time.Duration

func (l linear) NextBackoff() time.Duration { return time.Duration(l) }

// ExponentialBackoff retries with "full jitter": the n-th sleep is uniform in
// [0, min(max, base·2ⁿ)). It spreads retries of many waiters so they do not
// hit Redis together. The Locker's default is ExponentialBackoff(50ms, 1s):
// with Pub/Sub wake-up the timer is only a fallback for lost notifications.
func ExponentialBackoff(base, max time.Duration) RetryFactory {
	if base <= 0 {
		base = time.Millisecond
	}
	if max < base {
		max = base
	}
	return func() RetryStrategy { return &exponential{base: base, max: max} }
}

type exponential struct {
	base, max time.Duration
	n         uint
}

func (e *exponential) NextBackoff() time.Duration {
	ceil := e.max
	if e.n < 62 {
		if c := e.base << e.n; c > 0 && c < e.max {
			ceil = c
		}
	}
	e.n++
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}
