package core

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Compare with errors.Is: the errors a Locker returns wrap
// or join these with more detail.
var (
	// ErrNotObtained reports that the lock was still held by another owner
	// when the wait budget ended, or when TryLock found it held. The error
	// returned is a *BusyError when the holder's remaining TTL is known; when
	// the caller's context ended while waiting, the error also matches the
	// context's error (errors.Is(err, context.Canceled) or
	// context.DeadlineExceeded).
	ErrNotObtained = errors.New("lockgate: lock not obtained")

	// ErrNotHeld reports an Unlock, TTL or Extend for a lock this owner no
	// longer holds: it expired, was taken by another owner, was deleted, or
	// the lease was already released. Nothing of another owner is touched.
	ErrNotHeld = errors.New("lockgate: lock not held")

	// ErrLockLost is the cause (context.Cause) of a lease context cancelled
	// because the lock was lost: a renewal found it owned by someone else or
	// gone, or renewals failed until the lease's validity ended.
	ErrLockLost = errors.New("lockgate: lock lost")

	// ErrUnavailable reports that Redis could not be reached or answered with
	// an error, so whether the lock is free is unknown. It is never reported
	// for a busy lock. HTTP adapters answer 503, gRPC Unavailable.
	ErrUnavailable = errors.New("lockgate: redis unavailable")

	// ErrInvalid reports bad input (an empty or too long key, a TTL below
	// MinTTL, a negative wait, ...). Nothing was sent to Redis. The error
	// text names the offending argument.
	ErrInvalid = errors.New("lockgate: invalid argument")

	// ErrClosed reports a call on a Locker after Close.
	ErrClosed = errors.New("lockgate: locker closed")
)

// BusyError is returned (as *BusyError) when a lock could not be obtained
// because another owner holds it. It matches ErrNotObtained with errors.Is;
// use errors.As or RetryAfter to read the holder's remaining TTL.
type BusyError struct {
	// Key is the lock name as given to Lock.
	Key string
	// RetryAfter is the holder's remaining TTL reported by the last failed
	// attempt; 0 when unknown (the key has no expiry).
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("lockgate: lock %q not obtained: held by another owner for %v more", e.Key, e.RetryAfter)
}

// Is reports whether target is ErrNotObtained.
func (e *BusyError) Is(target error) bool { return target == ErrNotObtained }

// RetryAfter returns the holder's remaining TTL carried by err, and whether
// err carries one (it is or wraps a *BusyError). Adapters use it for the
// Retry-After header and gRPC RetryInfo.
func RetryAfter(err error) (time.Duration, bool) {
	var be *BusyError
	if errors.As(err, &be) {
		return be.RetryAfter, true
	}
	return 0, false
}

// RetryAfterSeconds is RetryAfter as an HTTP Retry-After value: the
// holder's remaining TTL rounded up to whole seconds, at least 1 (also when
// err carries no TTL, so a client never retries at once).
func RetryAfterSeconds(err error) int {
	d, _ := RetryAfter(err)
	return max(int((d+time.Second-1)/time.Second), 1)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}
