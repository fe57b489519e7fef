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
	// EventWaiting: a Lock found the lock busy and now waits for it in the
	// lock's queue. Its EventAcquired or EventNotObtained follows, with
	// Waited set.
	EventWaiting
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
	case EventWaiting:
		return "waiting"
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
	// Permits is the permits count of a Semaphore's events (the call's
	// permits argument); 0 for a lock's.
	Permits int
	// Read reports an RLock's events (a reader's hold of a lock).
	Read bool
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
	// Err is the failure, if any. For EventLost: ErrNotHeld when a renewal
	// or Extend found the lock gone or another owner's, ErrLockLost when
	// renewals failed until the lease's validity ended, ErrClosed when
	// Close ended the lease (its lock expires after its TTL).
	Err error
	// Waited is true (acquired, not obtained) when the call waited in the
	// lock's queue: an EventWaiting preceded it.
	Waited bool
	// Retry is true (released) for an Unlock that retries a release that
	// failed: the hold was already given up once.
	Retry bool
	// HolderTag is the tag (WithHolderTag) the holder stored with the lock,
	// as the last busy answer carried it (waiting, acquired after a wait,
	// not obtained); empty when the holder stored none or no tag function
	// is set on this Locker.
	HolderTag string
	// ClockOffset is the Redis server's clock minus the local clock, as
	// estimated from the server time the acquire script read and the
	// round trip's midpoint (error at most half the round trip). Valid
	// when ClockSampled: a fresh acquisition (for a Redlock, of the node
	// whose clock was ahead).
	ClockOffset  time.Duration
	ClockSampled bool
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
