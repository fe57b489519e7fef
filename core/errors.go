package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, which returned errors wrap or join: compare with errors.Is.
// See docs/usage.md, "Errors".
var (
	// ErrNotObtained reports that another owner still held the lock when the
	// wait budget ended or TryLock tried: a *BusyError, joined with ctx's error
	// if ctx ended. A Redis that did not answer is ErrUnavailable, never this.
	ErrNotObtained = errors.New("lockgate: lock not obtained")

	// ErrNotHeld reports an Unlock, TTL or Extend of a lock this owner no longer
	// holds (expired, taken, deleted, released, lost); no other owner is touched.
	ErrNotHeld = errors.New("lockgate: lock not held")

	// ErrLockLost is the context.Cause of a lease context whose lock was lost
	// (gone, another owner's, or not renewed in time); Lock with that ctx reports it.
	ErrLockLost = errors.New("lockgate: lock lost")

	// ErrUnavailable reports that Redis could not be reached, did not answer
	// within the budget, or failed: whether the lock is free is unknown. Never
	// for a busy lock. Adapters answer 503 / Unavailable.
	ErrUnavailable = errors.New("lockgate: redis unavailable")

	// ErrNotReplicated reports a grant too few replicas acknowledged in time
	// (WithReplicaAck), released again, or such a renewal (Extend), which does
	// not count. It matches ErrUnavailable.
	ErrNotReplicated = fmt.Errorf("%w: not acknowledged by enough replicas", ErrUnavailable)

	// ErrInvalid reports bad input (empty or too long key, TTL below MinTTL,
	// negative wait, nil client, ...), named in the text; nothing was sent.
	ErrInvalid = errors.New("lockgate: invalid argument")

	// ErrUnsupported reports a Redis server the Locker cannot work with (older
	// than 7.0, named in the text). Adapters answer 503, never failing open.
	ErrUnsupported = errors.New("lockgate: redis server not supported")

	// ErrClosed reports a call on a Locker after Close or Shutdown, and is
	// the cause of the contexts of leases they ended.
	ErrClosed = errors.New("lockgate: locker closed")
)

// BusyError (as *BusyError) reports a lock another owner holds. It matches
// ErrNotObtained; read its hint with errors.As or RetryAfter.
type BusyError struct {
	// Key is the lock name as given to Lock.
	Key string
	// RetryAfter estimates when the lock is likely free: this Locker's mean hold
	// time (before any: HolderTTL, or 1s), capped by HolderTTL (once that ran
	// out, by the holder's TTL as last seen). Not a promise.
	RetryAfter time.Duration
	// HolderTTL is the holder's remaining TTL as last seen: an upper bound on
	// the wait unless the holder renews.
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

// roundForText rounds d for a message: to 1ms under a second, else to 100ms.
func roundForText(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// Is reports whether target is ErrNotObtained.
func (e *BusyError) Is(target error) bool { return target == ErrNotObtained }

// RetryAfter returns err's hint (BusyError.RetryAfter) and whether it carries
// one. Adapters use it for Retry-After and gRPC RetryInfo.
func RetryAfter(err error) (time.Duration, bool) {
	var be *BusyError
	if errors.As(err, &be) {
		return be.RetryAfter, true
	}
	return 0, false
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1
// (also without a hint, so a client never retries at once).
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
