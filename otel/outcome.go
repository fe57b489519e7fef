package otellock

import (
	"context"
	"errors"

	"github.com/lockgate/lockgate/core"
)

// The outcome attribute of lockgate.lock.acquire.duration.
const (
	OutcomeAcquired    = "acquired"    // a fresh hold
	OutcomeReentered   = "reentered"   // a re-entry of a hold in the context's chain: no round trip
	OutcomeBusy        = "busy"        // held by another owner until the wait budget ended
	OutcomeCanceled    = "canceled"    // the caller's context was cancelled, or the Locker closed
	OutcomeUnavailable = "unavailable" // Redis down, hung, failing or not supported
	OutcomeInvalid     = "invalid"     // bad input: nothing was sent
)

// acquireOutcome names the outcome of a Lock or TryLock event. A context
// cancelled while waiting is the caller's doing (canceled) even when the
// lock was busy; a deadline that ended the wait of a busy lock is busy
// (the context's deadline was the wait budget).
func acquireOutcome(e core.Event) string {
	err := e.Err
	switch {
	case err == nil && e.Reentrant:
		return OutcomeReentered
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, core.ErrInvalid):
		return OutcomeInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, core.ErrClosed), errors.Is(err, core.ErrLockLost):
		return OutcomeCanceled
	case errors.Is(err, core.ErrNotObtained):
		return OutcomeBusy
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrUnsupported):
		return OutcomeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled // the context ended before any answer
	}
	return OutcomeUnavailable
}

// releaseOutcome names the outcome attribute of lockgate.lock.releases.
func releaseOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, core.ErrNotHeld):
		return "not_held"
	}
	return "failed"
}

// lostReason names the reason attribute of lockgate.lock.lost.
func lostReason(err error) string {
	switch {
	case errors.Is(err, core.ErrNotHeld):
		return "not_held" // a renewal or Extend found it gone or another's
	case errors.Is(err, core.ErrClosed):
		return "closed" // Close ended the lease without releasing it
	}
	return "expired" // renewals failed until the lease's validity ended
}
