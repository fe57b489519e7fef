package core

import (
	"cmp"
	"context"
	"time"
)

// EventKind names what an Event reports.
type EventKind int

const (
	// EventAcquired: a Lock or TryLock obtained (or re-entered) the lock.
	EventAcquired EventKind = iota + 1
	// EventNotObtained: a Lock or TryLock gave up; Err says why.
	EventNotObtained
	// EventReleased: Unlock finished (Err: nil, ErrNotHeld or a Redis error).
	EventReleased
	// EventRenewed: one watchdog renewal of one lease (Err set on failure).
	EventRenewed
	// EventLost: a lease was lost; its context is cancelled with ErrLockLost.
	EventLost
	// EventExtended: Lease.Extend finished (Err set on failure).
	EventExtended
	// EventWarning: a server setting endangers locks (eviction); Err says how.
	EventWarning
	// EventWaiting: a Lock found the lock busy and queued; its EventAcquired or
	// EventNotObtained follows, with Waited set.
	EventWaiting
)

func (k EventKind) String() string {
	names := [...]string{EventAcquired: "acquired", EventNotObtained: "not_obtained", EventReleased: "released",
		EventRenewed: "renewed", EventLost: "lost", EventExtended: "extended", EventWarning: "warning", EventWaiting: "waiting"}
	if k >= 0 && int(k) < len(names) && names[k] != "" {
		return names[k]
	}
	return "unknown"
}

// Event is what an Observer is told. Fields that do not apply are zero.
type Event struct {
	Kind EventKind
	// Key is the lock name; it carries request data, so metrics use Pattern.
	Key string
	// Pattern is the call's WithPattern (default UnnamedPattern): bounded.
	Pattern string
	// Permits is a Semaphore call's permits count; 0 for a lock.
	Permits int
	// Read reports an RLock's events (a reader's hold of a lock).
	Read bool
	// Wait is the time spent in Lock/TryLock (acquired, not obtained).
	Wait time.Duration
	// Held is how long the lease was held (released, lost).
	Held time.Duration
	// Attempts counts the acquire scripts one Lock call sent (0 for a re-entry).
	Attempts int
	// Reentrant: the call re-entered (or gave back) a hold of ctx's lease chain.
	Reentrant bool
	// Fence is the lease's fencing token (acquired, released, lost).
	Fence int64
	// Err is the failure, if any. For EventLost: ErrNotHeld (the lock was gone
	// or another owner's), ErrLockLost (renewals failed until the validity
	// ended), ErrClosed (Close ended the lease; the lock expires by its TTL).
	Err error
	// Waited: the call waited in the queue (an EventWaiting preceded it).
	Waited bool
	// Retry (released): the Unlock retried a release that had failed.
	Retry bool
	// HolderTag is the holder's tag (WithHolderTag) from the last busy answer;
	// empty when none was stored or this Locker has no tag function.
	HolderTag string
	// ClockOffset is the server's clock minus the local one, estimated at the
	// round trip's midpoint (error at most half of it). Valid when ClockSampled:
	// a fresh acquisition on one deployment (a Redlock's first attempt
	// proposes its fence from the Locker's own clock: not sampled).
	ClockOffset  time.Duration
	ClockSampled bool
}

// Observer is told of lock events, synchronously on the goroutine doing the
// work (the watchdog's for renewals and losses): Observe must be fast, safe
// for concurrent calls, and must not call back into the Locker.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// observed is what an acquisition learns only to tell the Observer: the
// holder's tag from the busy answers and the server clock's offset.
type observed struct {
	holderTag string // the last holder tag a busy answer carried
	offset    time.Duration
	sampled   bool // offset is an estimate of the server's clock
}

// sawHolder notes the holder tag a busy answer carried ("": none, the last stays).
func (o *observed) sawHolder(tag string) { o.holderTag = cmp.Or(tag, o.holderTag) }

// sampleClock estimates the offset of the server's clock from a fence taken
// now (the server's clock in µs) by a call sent at wall: against the round
// trip's midpoint, so its error is at most half the round trip.
func (o *observed) sampleClock(fence int64, wall time.Time) {
	o.offset = time.UnixMicro(fence).Sub(wall.Add(time.Since(wall) / 2))
	o.sampled = true
}
