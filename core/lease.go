package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// hold is one acquisition in Redis: one owner, one fence. The lease that
// took it and every lease that re-entered it share it; re-entry is counted
// here, in the process, and only the last Unlock releases the lock in Redis.
type hold struct {
	l        *Locker
	key      string
	keys     lockKeys
	owner    ownerID
	fence    int64
	acquired time.Time
	watchdog bool
	release  time.Duration // release timeout
	first    *Lease        // its context is the parent of every re-entry's

	// uncertain: a call of this owner may have run without its answer (an
	// attempt that failed, a release that failed): its release leaves a
	// done marker (see backend.release)
	uncertain atomic.Bool
	// releaseSent: a release whose answer was lost was sent while the hold
	// was valid; a later release that finds the lock gone finds that one's
	// work (no other owner could have taken the lock before it ran)
	releaseSent atomic.Bool
	// unknownTTL: the longest TTL (ns) of a renewal (the watchdog's or
	// Extend's) that may have run without its answer, 0 for none; an
	// answered renewal at least as long clears it. A hold lost with one
	// is given back, since it may have extended the lock in Redis (see
	// mayHaveRenewed).
	unknownTTL atomic.Int64

	count      atomic.Int32 // leases holding it; 0 once the last one unlocked
	end        atomic.Int32 // why it ended (endLive while held)
	ttl        atomic.Int64 // current lease time (ns), changed by Extend
	validUntil atomic.Int64 // validity end, ns on the Locker's monotonic clock

	// parentDone is the Done channel of the context given to Lock (nil when
	// it never ends): once it is closed the hold is no longer renewed
	parentDone <-chan struct{}

	// watchdog bookkeeping, guarded by the watchdog's mutex
	renewAt    int64  // next renewal due, monotonic ns
	abandoned  bool   // its context ended without Unlock: not renewed any more
	pending    bool   // a renewal is in flight
	handedOver bool   // handed over by a release: renew once to the TTL even without the watchdog
	pattern    string // WithPattern of the acquisition, for observations
	heapIndex  int    // index in the watchdog heap, -1 when not scheduled
	heapKey    int64  // heap key: next(h) when last placed
}

// Why a hold ended.
const (
	endLive     int32 = iota // held (or its release failed and may be retried)
	endReleased              // released in Redis by its owner
	endNotHeld               // the release found it gone or another owner's
	endLost                  // lost (ErrLockLost)
	endClosed                // the Locker was closed or shut down
)

var errLostNotHeld = fmt.Errorf("%w: %w", ErrNotHeld, ErrLockLost)

// errAbandoned is why a lease whose context ended without Unlock was lost:
// its lock was no longer renewed and expired.
var errAbandoned = fmt.Errorf("%w: the lease's context ended without Unlock, so its lock was no longer renewed", ErrLockLost)

// parentEnded reports whether the first lease's context has ended (the
// context given to Lock ended, or the first lease was unlocked) while the
// hold is still held (not unlocked): the leases left are re-entries, whose
// contexts ended with it (see reenter), never unlocked.
func (h *hold) parentEnded() bool {
	done := h.first.ctx.Done()
	if h.l.mut.firstCtxOnly {
		done = h.parentDone
	}
	if done == nil || h.count.Load() <= 0 {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Lease is a held lock. Its methods are safe for concurrent use and on a nil
// *Lease (which holds nothing: Unlock returns ErrNotHeld, Done is closed).
type Lease struct {
	h         *hold    // nil for a LockMulti's lease
	parts     []*Lease // a LockMulti's leases, one per name, sorted
	parent    *Lease   // the innermost lease of the context given to Lock
	reentrant bool
	ctx       leaseCtx // one allocation with the lease
	cancel    context.CancelCauseFunc
	unlocked  atomic.Bool // Unlock was called
	gaveBack  atomic.Bool // and returned nil
	// stopFollow stops a re-entry's context from following the first
	// lease's (see newLease); nil for a first lease
	stopFollow func() bool
}

// newHeld makes the hold of a lock an acquisition obtained (owner, fence,
// validity and first renewal on the Locker's monotonic clock, the call's
// options o) and its first lease, whose context derives from ctx.
// handedOver marks a hold granted by a release: it claims the whole TTL
// once, even without the watchdog. The caller hands the hold to the watchdog.
func newHeld(ctx context.Context, l *Locker, key string, keys lockKeys, owner ownerID, o *callOptions, fence, validUntil, renewAt int64, handedOver bool) *Lease {
	h := &hold{
		l:          l,
		key:        key,
		keys:       keys,
		owner:      owner,
		fence:      fence,
		acquired:   time.Now(),
		watchdog:   o.watchdog,
		release:    o.releaseTimeout,
		renewAt:    renewAt,
		handedOver: handedOver, // granted: claims the whole TTL once, even without the watchdog
		pattern:    o.pattern,
		heapIndex:  -1,
		parentDone: ctx.Done(),
	}
	h.count.Store(1)
	h.ttl.Store(int64(o.ttl))
	h.validUntil.Store(validUntil)
	s := newLease(h, ctx, false)
	h.first = s
	return s
}

// newLease makes a lease on h whose context derives from parent ctx.
func newLease(h *hold, ctx context.Context, reentrant bool) *Lease {
	s := &Lease{h: h, parent: leaseFrom(ctx), reentrant: reentrant}
	inner, cancel := context.WithCancelCause(ctx)
	s.ctx, s.cancel = leaseCtx{Context: inner, lease: s}, cancel
	return s
}

// reenter adds a lease to h for a Lock with ctx, or returns nil when h has
// ended or its last lease has already unlocked. The re-entry's context is
// cancelled with the first lease's, whatever ctx (a context that kept the
// first lease's values without its cancellation, context.WithoutCancel):
// the hold lives as long as the first lease's context (see parentEnded).
func (h *hold) reenter(ctx context.Context) *Lease {
	for {
		n := h.count.Load()
		if n <= 0 || h.end.Load() != endLive {
			return nil
		}
		if h.count.CompareAndSwap(n, n+1) {
			s := newLease(h, ctx, true)
			if !h.l.mut.firstCtxOnly {
				first := &h.first.ctx
				s.stopFollow = context.AfterFunc(first, func() { s.cancel(context.Cause(first)) })
			}
			return s
		}
	}
}

// Key returns the lock name as given to Lock.
func (s *Lease) Key() string {
	switch {
	case s == nil:
		return ""
	case s.parts != nil:
		return s.multiKey()
	}
	return s.h.key
}

// Pattern returns the lock's pattern (WithPattern; UnnamedPattern
// without one): what logs and metrics may name it by, unlike Key.
func (s *Lease) Pattern() string {
	switch {
	case s == nil:
		return ""
	case s.parts != nil:
		return s.parts[0].Pattern()
	}
	return s.h.pattern
}

// Fence returns the lease's fencing token: greater than the fence of every
// earlier holder of this key (conditions in docs/fencing.md), the same for
// every re-entry of one hold. Pass it with every write the lock protects,
// so the store can reject a lower one. A LockMulti's lease answers the
// highest of its fences; fence each name's writes with FenceOf.
func (s *Lease) Fence() int64 {
	switch {
	case s == nil:
		return 0
	case s.parts != nil:
		return s.multiFence()
	}
	return s.h.fence
}

// Reentrant reports whether this lease re-entered a lock that a lease of
// its context's chain already held (a LockMulti's lease: each of its locks).
func (s *Lease) Reentrant() bool {
	if s != nil && s.parts != nil {
		return s.multiReentrant()
	}
	return s != nil && s.reentrant
}

// endedCtx is the context of a nil lease: already cancelled.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

// Context returns the lease's lifetime context: derived from the ctx given
// to Lock (it keeps that context's values and deadline), carrying the lease
// (a Lock of the same key with it, or with a context derived from it,
// re-enters), and cancelled when the lease is unlocked (cause
// context.Canceled), lost (cause ErrLockLost, read it with context.Cause),
// or its Locker is closed (cause ErrClosed). A lost lease's context is
// cancelled at the end of its validity (Valid), before Redis can hand the
// lock to anyone else. The context of a nil lease is already cancelled.
func (s *Lease) Context() context.Context {
	if s == nil {
		return endedCtx
	}
	return &s.ctx
}

// Done is a shortcut for Context().Done(); closed for a nil lease.
func (s *Lease) Done() <-chan struct{} { return s.Context().Done() }

// Valid returns the end of the lease's validity on the local clock: the
// moment after which another owner could obtain the lock if no renewal
// gets through. Renewals move it forward. Zero for a nil lease, and once
// the lease was unlocked, lost or its Locker closed.
func (s *Lease) Valid() time.Time {
	switch {
	case s == nil:
		return time.Time{}
	case s.parts != nil:
		return s.multiValid()
	case s.unlocked.Load() || s.h.end.Load() != endLive:
		return time.Time{} // given back, lost or closed: valid no more
	}
	return s.h.l.timeAt(s.h.validUntil.Load())
}

// TTL asks Redis for the lock's remaining time to live, within the same
// budget as Extend. It returns ErrNotHeld when this owner no longer holds
// the lock (also ErrLockLost once the lease was lost), ErrClosed after
// Close, an ErrUnavailable error when Redis cannot answer.
func (s *Lease) TTL(ctx context.Context) (time.Duration, error) {
	if s != nil && s.parts != nil {
		return s.multiTTL(ctx)
	}
	if s == nil {
		return 0, ErrNotHeld
	}
	if err := s.h.endErr(); err != nil {
		return 0, err
	}
	d, err := bounded(s.h.l, ctx, s.h.l.callDeadline(ctx), func(cctx context.Context) (time.Duration, error) {
		return s.h.l.be.pttl(cctx, &s.h.keys, s.h.owner.id)
	}, nil)
	if err != nil && err != ErrNotHeld {
		return 0, opError("ttl", err)
	}
	return d, err
}

// Extend renews the lease by hand to ttl from now (and makes ttl the lease
// time of later watchdog renewals), within ctx's deadline or the Locker's
// attempt timeout (WithAttemptTimeout, default 500ms), whichever is first,
// plus at most 50ms, whatever the client's timeouts. The lock's expiry in
// Redis only grows.
// Errors: ErrInvalid for a ttl below MinTTL or above MaxTTL, ErrNotHeld
// when the lock is no longer held (the lease is then lost; ErrLockLost too
// when it was lost before, or while the renewal was on its way, which then
// gives the lock back), ErrClosed after Close, ErrUnavailable when Redis
// cannot answer.
func (s *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if s != nil && s.parts != nil {
		return s.multiExtend(ctx, ttl)
	}
	if s == nil {
		return ErrNotHeld
	}
	if err := s.h.endErr(); err != nil {
		return err
	}
	h := s.h
	sent := h.l.clock()
	b := []renewal{{keys: &h.keys, owner: &h.owner, ttl: ttl, ttlArg: ms(ttl)}}
	_, err := bounded(h.l, ctx, h.l.callDeadline(ctx), func(cctx context.Context) (struct{}, error) {
		h.l.be.renew(cctx, b, []int{0})
		return struct{}{}, b[0].err
	}, nil)
	if err == errLate {
		err = errNoAnswer
	}
	if err != nil && err != ErrClosed && !neverRan(err) {
		h.mayHaveRenewed(ttl)
	}
	switch {
	case err == ErrClosed:
	case err != nil:
		err = unavailable("extend", err)
	case !b[0].held:
		err = ErrNotHeld
		if h.count.Load() > 0 { // not an Unlock's release that ran first
			h.l.wd.lose(h, ErrNotHeld)
		}
	default:
		h.ttl.Store(int64(ttl))
		h.renewedFor(ttl)
		if !h.l.wd.renewed(h, sent, ttl) {
			// The hold ended (or is being released) while the renewal
			// was in flight.
			if err = h.endErr(); err == nil {
				err = ErrNotHeld
			}
			if h.end.Load() == endLost {
				h.giveBack() // nobody holds it here: see renewPart
			}
		}
	}
	h.l.observe(ctx, Event{Kind: EventExtended, Key: h.key, Pattern: h.pattern, Permits: h.keys.permits, Read: h.keys.read, Fence: h.fence, Err: err})
	return err
}

// Unlock gives back this lease: a re-entry only drops its hold; the last
// lease of a hold releases the lock in Redis, handing it to the first
// waiter. The lease's context is cancelled (cause context.Canceled). The
// release ignores ctx's cancellation and deadline (ctx only lends its
// values) and is bounded by WithReleaseTimeout (default 1s) whatever the
// client's timeouts; after a failure, calling Unlock again retries it.
//
// Errors: ErrNotHeld when the lease was already given back, or the lock
// expired, was taken by another owner or was lost (then it also matches
// ErrLockLost); an ErrUnavailable error when Redis did not answer in time
// (the lock expires after its TTL unless Unlock is called again);
// ErrClosed after Close (the lock expires after its TTL).
func (s *Lease) Unlock(ctx context.Context) error {
	switch {
	case s == nil:
		return ErrNotHeld
	case s.parts != nil:
		return s.multiUnlock(ctx)
	}
	h := s.h
	if !s.unlocked.CompareAndSwap(false, true) {
		// Called again: a release that failed is retried (or found done).
		if !s.gaveBack.Load() && h.count.Load() == 0 {
			switch h.end.Load() {
			case endLive:
				return s.done(h.releaseInRedis(ctx, true))
			case endReleased:
				return s.done(nil) // the failed release went through after all
			}
		}
		return ErrNotHeld
	}
	if s.drop() > 0 {
		err := h.endErr() // a re-entry of a hold that was lost or closed
		h.l.observe(ctx, Event{Kind: EventReleased, Key: h.key, Pattern: h.pattern, Permits: h.keys.permits, Read: h.keys.read, Reentrant: s.reentrant, Fence: h.fence, Err: err})
		return s.done(err)
	}
	return s.done(h.releaseInRedis(ctx, false))
}

// drop takes s out of its hold in the process and returns how many leases
// the hold has left: the count drops, then s's context ends (cause
// context.Canceled) and stops following the first lease's. The count
// drops first: the watchdog takes a first lease's ended context with
// leases left for forgotten re-entries (parentEnded), which an Unlock
// under way is not.
func (s *Lease) drop() int32 {
	left := s.h.count.Add(-1)
	s.cancel(context.Canceled)
	if s.stopFollow != nil {
		s.stopFollow()
	}
	return left
}

// done records that Unlock gave this lease back (err nil) and returns err.
func (s *Lease) done(err error) error {
	if err == nil {
		s.gaveBack.Store(true)
	}
	return err
}

// mayHaveRenewed records a renewal to ttl whose outcome is unknown (it may
// have run). The hold's loss gives such a renewal back (watchdog.settle);
// one that ends after the loss was decided gives it back itself (both may:
// a release is owner-checked).
func (h *hold) mayHaveRenewed(ttl time.Duration) {
	h.recordUnknown(ttl)
	if h.end.Load() == endLost && !h.l.mut.keepLateRenewal {
		h.giveBack()
	}
}

// recordUnknown is mayHaveRenewed's record alone (for a caller that holds
// the watchdog's lock, of a hold not lost: see renewedPart).
func (h *hold) recordUnknown(ttl time.Duration) {
	for {
		old := h.unknownTTL.Load()
		if int64(ttl) <= old || h.unknownTTL.CompareAndSwap(old, int64(ttl)) {
			return
		}
	}
}

// renewedFor records an answered renewal to ttl: a renewal of unknown
// outcome no longer than it changed nothing it did not.
func (h *hold) renewedFor(ttl time.Duration) {
	if old := h.unknownTTL.Load(); old != 0 && old <= int64(ttl) {
		h.unknownTTL.CompareAndSwap(old, 0)
	}
}

// endErr is the error of a call on h once it ended (nil while it is live).
func (h *hold) endErr() error {
	switch h.end.Load() {
	case endLive:
		return nil
	case endLost:
		return errLostNotHeld
	case endClosed:
		return ErrClosed
	}
	return ErrNotHeld
}

// releaseInRedis sends the release of the whole hold once (retry: again,
// after a release that failed).
func (h *hold) releaseInRedis(ctx context.Context, retry bool) error {
	if err := h.endErr(); err != nil {
		return err
	}
	l := h.l
	l.wd.remove(h)
	held, err := l.releaseBounded(ctx, h)
	if err == nil {
		l.answered()
		held = held || h.releaseSent.Load()
	}
	switch {
	case err != nil:
		// The hold stays live (not renewed): Unlock again retries.
	case held:
		h.end.CompareAndSwap(endLive, endReleased)
		l.holdTimes.observe(time.Since(h.acquired))
	default:
		h.end.CompareAndSwap(endLive, endNotHeld)
		err = ErrNotHeld
	}
	l.released(ctx, h, retry, err)
	return err
}

// releaseBounded runs the release script within the hold's release
// timeout, detached from ctx's cancellation, and sends it again (leaving a
// done marker) after a failure that may pass while time is left. A release
// not answered in time goes on in the background; its late answer still
// ends the hold.
func (l *Locker) releaseBounded(ctx context.Context, h *hold) (bool, error) {
	var endLate func(bool, error)
	if l.answersLate() {
		endLate = func(held bool, err error) {
			if err == nil && (held || h.releaseSent.Load()) {
				h.end.CompareAndSwap(endLive, endReleased)
			} else if err == nil {
				h.end.CompareAndSwap(endLive, endNotHeld)
			}
		}
	}
	held, err := bounded(l, detached(ctx), time.Now().Add(h.release), func(cctx context.Context) (bool, error) {
		backoff := retryMin
		for {
			valid := l.clock() < h.validUntil.Load()
			held, err := l.be.release(cctx, &h.keys, h.owner, h.uncertain.Load())
			if err == nil {
				return held, nil
			}
			if !neverRan(err) {
				// It may have run: any copy from now on leaves a marker.
				h.uncertain.Store(true)
				if valid {
					h.releaseSent.Store(true)
				}
			}
			if !transient(err) || !sleepCtx(cctx, backoff) {
				return false, withCause(err)
			}
			backoff *= 2
		}
	}, endLate)
	switch {
	case err == errLate:
		return false, unavailable("release", fmt.Errorf("no answer within %v", h.release))
	case err == ErrClosed:
		return false, err
	case err != nil:
		return false, unavailable("release", err)
	}
	return held, nil
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaseCtx is the lease's lifetime context: a cancelable context whose
// owner value is the lease.
type leaseCtx struct {
	context.Context
	lease *Lease
}

func (c *leaseCtx) Value(key any) any {
	if key == (ownerKey{}) {
		return c.lease
	}
	return c.Context.Value(key)
}

func (c *leaseCtx) String() string { return "lockgate.Lease(" + c.lease.Key() + ").Context" }

// errNoAnswer is the reason of an ErrUnavailable error for a call Redis
// did not answer within the caller's budget.
var errNoAnswer = errors.New("no answer within the call's budget")
