package core

import (
	"context"
	"sync/atomic"
	"time"
)

// Lease is a held lock. Its methods are safe for concurrent use and on a nil
// *Lease (which holds nothing: Unlock returns ErrNotHeld).
type Lease struct {
	l         *Locker
	key       string
	keys      *lockKeys
	owner     *ownerTag
	ownerArg  any // owner.id boxed once, for renewal batches
	windowArg any // the fence window, for the release script
	fence     int64
	reentrant bool
	watchdog  bool
	acquired  time.Time

	ctx    *leaseCtx
	cancel context.CancelCauseFunc

	ttl        atomic.Int64 // current lease time (ns), changed by Extend
	validUntil atomic.Int64 // validity end, ns on the Locker's monotonic clock
	done       atomic.Bool  // released, lost or the Locker closed
	released   atomic.Bool  // Unlock was called

	// watchdog bookkeeping, guarded by the watchdog's mutex
	renewAt int64 // next renewal due, monotonic ns
	pending bool  // a renewal is in flight
	hidx    int   // index in the watchdog heap, -1 when not scheduled
	hkey    int64 // heap key: next(s) when last placed
}

// Key returns the lock name as given to Lock.
func (s *Lease) Key() string {
	if s == nil {
		return ""
	}
	return s.key
}

// Fence returns the lease's fencing token: strictly greater than the fence of
// every earlier holder of this key (see the README for the exact conditions),
// and the same for every re-entry by one owner. Pass it with every write the
// lock protects, so the store can reject a write carrying a lower fence than
// it has already seen.
func (s *Lease) Fence() int64 {
	if s == nil {
		return 0
	}
	return s.fence
}

// Reentrant reports whether this lease re-entered a lock its owner already
// held.
func (s *Lease) Reentrant() bool { return s != nil && s.reentrant }

// Context returns the lease's lifetime context: derived from the ctx given
// to Lock, carrying the lease's owner (a Lock with it, or a context derived
// from it, re-enters), and cancelled when the lease is released (cause
// context.Canceled), lost (cause ErrLockLost, read it with context.Cause), or
// its Locker is closed (cause ErrClosed). Its Deadline reports the lease's
// current validity: the moment, on the local clock, after which another
// owner could obtain the lock; renewals move it forward.
func (s *Lease) Context() context.Context {
	if s == nil {
		return context.Background()
	}
	return s.ctx
}

// Done is a shortcut for Context().Done().
func (s *Lease) Done() <-chan struct{} { return s.Context().Done() }

// Valid returns the end of the lease's validity on the local clock.
func (s *Lease) Valid() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.l.monoTime(s.validUntil.Load())
}

// TTL asks Redis for the lock's remaining time to live. It returns ErrNotHeld
// when this owner no longer holds the lock, an ErrUnavailable error when
// Redis cannot answer.
func (s *Lease) TTL(ctx context.Context) (time.Duration, error) {
	if s == nil || s.done.Load() {
		return 0, ErrNotHeld
	}
	d, err := s.l.be.pttl(ctx, s.keys, s.owner.id)
	if err != nil && err != ErrNotHeld {
		return 0, unavailable("ttl", err)
	}
	return d, err
}

// Extend renews the lease by hand to ttl from now (and makes ttl the lease
// time of later watchdog renewals). The lock's expiry in Redis only grows.
// Errors: ErrInvalid for a ttl below MinTTL, ErrNotHeld when the lock is no
// longer held (the lease is then lost), ErrUnavailable when Redis cannot
// answer.
func (s *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < MinTTL {
		return invalidf("ttl %v is below the minimum %v", ttl, MinTTL)
	}
	if s == nil || s.done.Load() {
		return ErrNotHeld
	}
	sent := s.l.mono()
	b := []renewal{{keys: s.keys, ownerArg: s.ownerArg, ttl: ttl, ttlArg: ms(ttl)}}
	s.l.be.renew(ctx, b)
	if b[0].err != nil {
		return unavailable("extend", b[0].err)
	}
	if !b[0].held {
		s.l.wd.lose(s, ErrNotHeld)
		return ErrNotHeld
	}
	s.ttl.Store(int64(ttl))
	s.l.wd.renewed(s, sent, ttl)
	return nil
}

// Unlock releases one hold of the lease; the last hold of its owner deletes
// the lock and wakes waiters. The lease's context is cancelled (cause
// context.Canceled). Unlock of a lease whose lock expired, was taken by
// another owner, or was already unlocked returns ErrNotHeld and deletes
// nothing of anyone else. A Redis failure returns an ErrUnavailable error
// (the lock then expires after its TTL). Pass a context that is not already
// cancelled: middleware use context.WithoutCancel(handlerCtx).
func (s *Lease) Unlock(ctx context.Context) error {
	if s == nil {
		return ErrNotHeld
	}
	if !s.released.CompareAndSwap(false, true) {
		return ErrNotHeld
	}
	// A lost lease still tries: the loss may have been declared while Redis
	// was unreachable, and the hold may still be ours.
	s.done.Store(true)
	s.l.wd.remove(s)
	s.cancel(context.Canceled)
	return s.release(ctx)
}

func (s *Lease) release(ctx context.Context) error {
	left, err := s.l.be.release(ctx, s.keys, s.owner.id, s.windowArg)
	switch {
	case err != nil:
		err = unavailable("release", err)
	case left < 0:
		err = ErrNotHeld
	}
	s.l.observe(ctx, Event{Kind: EventReleased, Key: s.key, Held: time.Since(s.acquired), Fence: s.fence, Err: err})
	return err
}

// leaseCtx is the lease's lifetime context: a cancelable context whose
// Deadline is the lease's validity and whose owner value is the lease.
type leaseCtx struct {
	context.Context
	lease *Lease
}

func (c *leaseCtx) Deadline() (time.Time, bool) {
	v := c.lease.Valid()
	if d, ok := c.Context.Deadline(); ok && d.Before(v) {
		return d, true
	}
	return v, true
}

func (c *leaseCtx) Value(key any) any {
	if key == (ownerKey{}) {
		return c.lease.owner
	}
	return c.Context.Value(key)
}

func (c *leaseCtx) String() string { return "lockgate.Lease(" + c.lease.key + ").Context" }
