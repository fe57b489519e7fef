package core

import (
	"context"
	"time"
)

// EventKind names what an Event reports.
type EventKind int

const (
	// EventAcquired: a Lock or TryLock obtained (or re-entered) the lock.
	EventAcquired EventKind = iota + 1
	// EventNotObtained: a Lock or TryLock gave up (busy, cancelled or Redis
	// unavailable; see Err).
	EventNotObtained
	// EventReleased: Unlock finished (Err is nil, ErrNotHeld or a Redis
	// error). An Unlock of a re-entry (Reentrant) releases nothing in Redis.
	EventReleased
	// EventRenewed: one watchdog renewal of one lease (Err set on failure).
	EventRenewed
	// EventLost: a lease was lost; its context is cancelled with ErrLockLost.
	EventLost
	// EventExtended: Lease.Extend finished (Err set on failure).
	EventExtended
	// EventWarning: the Redis server is configured in a way that endangers
	// locks (an eviction policy other than noeviction); Err says how.
	EventWarning
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventNotObtained:
		return "not_obtained"
	case EventReleased:
		return "released"
	case EventRenewed:
		return "renewed"
	case EventLost:
		return "lost"
	case EventExtended:
		return "extended"
	case EventWarning:
		return "warning"
	}
	return "unknown"
}

// Event is what an Observer is told. Fields that do not apply are zero.
type Event struct {
	Kind EventKind
	// Key is the lock name as given to Lock. It carries request data: put
	// Pattern, not Key, in metric attributes and span names.
	Key string
	// Pattern is the call's WithPattern (UnnamedPattern without one): the
	// kind of lock, bounded.
	Pattern string
	// Wait is the time spent in Lock/TryLock (acquired, not obtained).
	Wait time.Duration
	// Held is how long the lease was held (released, lost).
	Held time.Duration
	// Attempts counts the acquire scripts sent by one Lock call (0 for a
	// re-entry, which needs no round trip).
	Attempts int
	// Reentrant is true when the acquisition re-entered (or the release
	// gave back) a hold of a lease in the context's chain.
	Reentrant bool
	// Fence is the lease's fencing token (acquired, released, lost).
	Fence int64
	// Err is the failure, if any.
	Err error
}

// Observer is told of lock events. Observe is called synchronously on the
// goroutine doing the work (renewals and losses: the watchdog's), so it must
// be fast and must not call back into the Locker. It may be called from many
// goroutines at once.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }
