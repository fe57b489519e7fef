package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Compare with errors.Is: the errors a Locker returns wrap
// or join these with more detail.
var (
	// ErrNotObtained reports that the lock was still held by another owner
	// when the wait budget ended, or when TryLock found it held. The error
	// returned is a *BusyError, joined with the context's error when the
	// caller's context ended while waiting. It is never reported for a Redis
	// that did not answer (that is ErrUnavailable).
	ErrNotObtained = errors.New("lockgate: lock not obtained")

	// ErrNotHeld reports an Unlock, TTL or Extend for a lock this owner no
	// longer holds: it expired, was taken by another owner, was deleted, or
	// the lease was already released or lost. Nothing of another owner is
	// touched.
	ErrNotHeld = errors.New("lockgate: lock not held")

	// ErrLockLost is the cause (context.Cause) of a lease context cancelled
	// because the lock was lost: a renewal found it owned by someone else or
	// gone, or renewals failed until the lease's validity ended. A Lock
	// whose context is such a lease's context reports it too.
	ErrLockLost = errors.New("lockgate: lock lost")

	// ErrUnavailable reports that Redis could not be reached, did not
	// answer within the caller's budget, or answered with an error, so
	// whether the lock is free is unknown. It is never reported for a busy
	// lock. HTTP adapters answer 503, gRPC Unavailable.
	ErrUnavailable = errors.New("lockgate: redis unavailable")

	// ErrNotReplicated reports that a lock was granted on the master but
	// fewer replicas than WithReplicaAck asks for acknowledged it within its
	// timeout: the lock was released again (or, for a renewal, the renewal
	// does not count). It matches ErrUnavailable (errors.Is), so adapters
	// answer 503 / Unavailable.
	ErrNotReplicated = fmt.Errorf("%w: not acknowledged by enough replicas", ErrUnavailable)

	// ErrInvalid reports bad input (an empty or too long key, a TTL below
	// MinTTL, a negative wait, a nil client, ...). Nothing was sent to
	// Redis. The error text names the offending argument.
	ErrInvalid = errors.New("lockgate: invalid argument")

	// ErrUnsupported reports a Redis server the Locker cannot work with
	// (older than 7.0: the scripts need PEXPIRE ... GT and SET ... GET). The
	// error text names the server's version. Adapters answer 503 and never
	// fail open on it.
	ErrUnsupported = errors.New("lockgate: redis server not supported")

	// ErrClosed reports a call on a Locker after Close or Shutdown, and is
	// the cause of the contexts of leases they ended.
	ErrClosed = errors.New("lockgate: locker closed")
)

// BusyError is returned (as *BusyError) when a lock could not be obtained
// because another owner holds it. It matches ErrNotObtained with errors.Is;
// use errors.As or RetryAfter to read the hint.
type BusyError struct {
	// Key is the lock name as given to Lock.
	Key string
	// RetryAfter is when the lock is likely free: the mean time this
	// Locker's own leases were held (or, before it has released any,
	// HolderTTL, or 1s when that is unknown), capped by HolderTTL (once
	// that has run out, by the holder's whole TTL as last seen). It is an
	// estimate, not a promise.
	RetryAfter time.Duration
	// HolderTTL is the holder's remaining time to live in Redis as last
	// seen: an upper bound on the wait while the holder is not renewing.
	// With the watchdog renewing it, the holder may keep the lock longer.
	HolderTTL time.Duration
	// Permits is a Semaphore's permits count, all of them held (HolderTTL:
	// the first to expire); 0 for a lock.
	Permits int
}

func (e *BusyError) Error() string {
	if e.Permits > 0 {
		return fmt.Sprintf("lockgate: semaphore %q: no permit of %d free (one likely free in %v, the first expires in %v unless renewed)",
			e.Key, e.Permits, roundForText(e.RetryAfter), roundForText(e.HolderTTL))
	}
	return fmt.Sprintf("lockgate: lock %q not obtained: held by another owner (likely free in %v, expires in %v unless renewed)",
		e.Key, roundForText(e.RetryAfter), roundForText(e.HolderTTL))
}

// roundForText rounds d for a message: to the millisecond under a second,
// to a tenth of a second above.
func roundForText(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// Is reports whether target is ErrNotObtained.
func (e *BusyError) Is(target error) bool { return target == ErrNotObtained }

// RetryAfter returns the hint carried by err (BusyError.RetryAfter), and
// whether err carries one (it is or wraps a *BusyError). Adapters use it for
// the Retry-After header and gRPC RetryInfo.
func RetryAfter(err error) (time.Duration, bool) {
	var be *BusyError
	if errors.As(err, &be) {
		return be.RetryAfter, true
	}
	return 0, false
}

// RetryAfterSeconds is RetryAfter as an HTTP Retry-After value: the hint
// rounded up to whole seconds, at least 1 (also when err carries no hint,
// so a client never retries at once).
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

// ctxErr is the error of an ended context: ctx.Err(), joined with its
// cause when that says more (ErrLockLost for a lost lease's context).
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}
