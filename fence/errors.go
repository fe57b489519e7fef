package fence

import (
	"errors"
	"fmt"
)

// ErrStale reports a write whose fence is lower than the highest one already
// recorded for its resource: the lease that guarded it was lost and a newer
// holder has written since. Nothing of the guarded write may be kept: roll the
// transaction back (Guard.Check) — a guarded Redis script (Script.Run) has
// written nothing. Every stale write returns a *StaleError that matches it:
// errors.Is(err, fence.ErrStale).
var ErrStale = errors.New("fence: stale fence")

// ErrInvalid reports a fence that is not positive (a lockgate fence always
// is: a write without a lease has none), or a resource that is empty or
// over MaxResourceLen bytes. Nothing is recorded.
var ErrInvalid = errors.New("fence: invalid fence or resource")

// StaleError is the error of a stale write (see ErrStale), with what the
// guard saw. Read it with errors.As(err, &e) where e is a *fence.StaleError.
type StaleError struct {
	// Resource is the resource the write was for.
	Resource string
	// Fence is the write's fence.
	Fence int64
	// Highest is the highest fence recorded for Resource when the write was
	// refused; 0 when it could not be read back.
	Highest int64
}

// Error reads "fence: stale fence 12 for "order:1:1": 15 already seen".
func (e *StaleError) Error() string {
	if e.Highest == 0 {
		return fmt.Sprintf("fence: stale fence %d for %q: a higher one already seen", e.Fence, e.Resource)
	}
	return fmt.Sprintf("fence: stale fence %d for %q: %d already seen", e.Fence, e.Resource, e.Highest)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// MaxResourceLen is the longest resource a guard records, in bytes: the
// longest lock name lockgate accepts (core.MaxKeyLen), so a lease's key
// always fits. The MySQL table's column is that wide.
const MaxResourceLen = 1024

// checkArgs returns ErrInvalid, wrapped with the reason, for a write that
// cannot be guarded.
func checkArgs(resource string, fence int64) error {
	switch {
	case fence <= 0:
		return fmt.Errorf("%w: fence %d is not positive (a write without a lease has none)", ErrInvalid, fence)
	case resource == "":
		return fmt.Errorf("%w: the resource is empty", ErrInvalid)
	case len(resource) > MaxResourceLen:
		return fmt.Errorf("%w: the resource is %d bytes, over MaxResourceLen (%d)", ErrInvalid, len(resource), MaxResourceLen)
	}
	return nil
}
