package core

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// hold is one acquisition in Redis (one owner, one fence), shared by the
// lease that took it and its re-entries. See docs/internals.md, "Re-entry".
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
	// lean: taken by a call that did not wait, without a tag, so it is held
	// in the lean form unless someone joined since: Unlock tries releaseLean
	// first (see acquire.lua). A waiter's hold is mostly full (handed over, or
	// others behind it): its release is the script, which reads both forms.
	lean bool

	// uncertain: a call may have run unanswered, so releases leave a done marker
	uncertain atomic.Bool
	// unseen: Redlock, its acquisition's node calls that may still run (markers)
	unseen []*pending
	// retakes: a renewal or Extend that may re-take a Redlock node after a
	// release was in flight, or its re-take went unanswered (markers)
	retakes atomic.Bool
	// releasing: a release in Redis began (beginRelease); extending: Extend
	// calls in flight. An Extend that finds releasing sends nothing; a
	// release that finds extending leaves done markers (a Redlock renewal
	// may re-take a node after the release).
	releasing atomic.Bool
	extending atomic.Int32
	// releaseSent: a release sent while h was valid may have run: gone means released
	releaseSent atomic.Bool
	// unknownTTL: longest renewal TTL (ns) of unknown outcome, 0 for none
	unknownTTL atomic.Int64

	count      atomic.Int32 // leases holding it; 0 once the last one unlocked
	end        atomic.Int32 // why it ended (endLive while held)
	ttl        atomic.Int64 // current lease time (ns), changed by Extend
	validUntil atomic.Int64 // validity end, ns on the Locker's monotonic clock

	// parentDone is Lock's ctx.Done() (nil if it never ends)
	parentDone <-chan struct{}

	// watchdog bookkeeping, guarded by the watchdog's mutex
	renewAt    int64  // next renewal due, monotonic ns
	abandoned  bool   // its context ended without Unlock: not renewed any more
	pending    bool   // a renewal is in flight
	unreported bool   // lost by a reader of its context: the scheduler reports it
	handedOver bool   // granted by a release: renew once to the TTL, even without the watchdog
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
	endClosed                // the Locker was closed or shut down (the last: endErrs)
)

// errAbandoned: the lease's context ended without Unlock, so its lock expired.
var errAbandoned = fmt.Errorf("%w: the lease's context ended without Unlock, so its lock was no longer renewed", ErrLockLost)

// parentEnded reports whether the first lease's context ended while leases
// are left: forgotten re-entries. See docs/internals.md, "Re-entry".
func (h *hold) parentEnded() bool {
	done := h.first.ctx.Context.Done() // not leaseCtx.Done: w.mu may be held
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
	// stopFollow stops a re-entry's context following the first lease's
	stopFollow func() bool
}

// newLease makes a lease on h whose context derives from parent ctx.
func newLease(h *hold, ctx context.Context, reentrant bool) *Lease {
	s := &Lease{h: h, parent: FromContext(ctx), reentrant: reentrant}
	inner, cancel := context.WithCancelCause(ctx)
	s.ctx, s.cancel = leaseCtx{Context: inner, lease: s}, cancel
	return s
}

// reenter adds a lease to h for ctx; nil once h ended or was unlocked. Its
// context ends with the first lease's: see docs/internals.md, "Re-entry".
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
		return strings.Join(s.Keys(), ",")
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

// Fence returns the lease's fencing token: greater than any earlier holder's
// of this key (conditions in docs/fencing.md), the same for every re-entry. Pass it with every write the lock
// protects. A LockMulti's lease answers the highest of its fences; fence
// each name's writes with FenceOf. See docs/fencing.md, "Fencing".
func (s *Lease) Fence() int64 {
	switch {
	case s == nil:
		return 0
	case s.parts != nil: // the highest
		var f int64
		for _, p := range s.parts {
			f = max(f, p.h.fence)
		}
		return f
	}
	return s.h.fence
}

// Reentrant reports whether this lease re-entered a lock that a lease of
// its context's chain already held (a LockMulti's lease: each of its locks).
func (s *Lease) Reentrant() bool {
	if s != nil && s.parts != nil { // every part re-entered
		return !slices.ContainsFunc(s.parts, func(p *Lease) bool { return !p.reentrant })
	}
	return s != nil && s.reentrant
}

// endedCtx is the context of a nil lease: already cancelled.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

// Context returns the lease's lifetime context: it derives from Lock's ctx
// and carries the lease (a Lock of the same key with it re-enters). It is
// cancelled on Unlock (cause context.Canceled), on loss (cause ErrLockLost,
// at the end of Valid, before Redis can hand the lock on) and on Close
// (cause ErrClosed). A nil lease's is already cancelled.
func (s *Lease) Context() context.Context {
	if s == nil {
		return endedCtx
	}
	return &s.ctx
}

// Done is a shortcut for Context().Done(); closed for a nil lease.
func (s *Lease) Done() <-chan struct{} { return s.Context().Done() }

// Valid returns the end of the lease's validity on the local clock, after
// which another owner could obtain the lock; renewals move it. Zero for a
// nil lease and once it was unlocked, lost or closed.
func (s *Lease) Valid() time.Time {
	switch {
	case s == nil:
		return time.Time{}
	case s.parts != nil: // the earliest
		v := s.parts[0].Valid()
		for _, p := range s.parts[1:] {
			if pv := p.Valid(); pv.Before(v) {
				v = pv
			}
		}
		return v
	case s.unlocked.Load() || s.h.end.Load() != endLive:
		return time.Time{}
	}
	return s.h.l.timeAt(s.h.validUntil.Load())
}

// TTL asks Redis for the lock's remaining time to live, within Extend's
// budget. Errors: ErrNotHeld when this owner no longer holds it (also
// ErrLockLost once lost), ErrClosed after Close, ErrUnavailable.
func (s *Lease) TTL(ctx context.Context) (time.Duration, error) {
	if s != nil && s.parts != nil { // the shortest
		ttls, err := eachPart(s.parts, func(p *Lease) (time.Duration, error) { return p.TTL(ctx) })
		if err != nil {
			return 0, err
		}
		return slices.Min(ttls), nil
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

// Extend renews the lease to ttl from now (the expiry in Redis only grows)
// and makes ttl the lease time of later renewals, within ctx's deadline or
// the attempt timeout (WithAttemptTimeout, default 500ms), whichever is
// first, plus at most 50ms. Errors: ErrInvalid for a ttl below MinTTL or
// above MaxTTL; ErrNotHeld when the lock is no longer held (the lease is
// then lost; also ErrLockLost if it was lost first); ErrClosed after Close;
// ErrUnavailable when Redis cannot answer.
func (s *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if s != nil && s.parts != nil {
		_, err := eachPart(s.parts, func(p *Lease) (struct{}, error) { return struct{}{}, p.Extend(ctx, ttl) })
		return err
	}
	if s == nil {
		return ErrNotHeld
	}
	if err := s.h.endErr(); err != nil {
		return err
	}
	h := s.h
	h.extending.Add(1)
	defer h.extending.Add(-1)
	if h.releasing.Load() {
		return cmp.Or(h.endErr(), ErrNotHeld) // released (or being released) meanwhile
	}
	sent := h.l.clock()
	b := []renewal{{keys: &h.keys, owner: &h.owner, ttl: ttl, ttlArg: ms(ttl)}}
	_, err := bounded(h.l, ctx, h.l.callDeadline(ctx), func(cctx context.Context) (struct{}, error) {
		h.l.be.renew(cctx, b, []int{0})
		return struct{}{}, b[0].err
	}, nil)
	h.extendMayRun(err, err == nil && b[0].unseen, ttl)
	switch {
	case err == ErrClosed:
	case err != nil:
		err = unavailable("extend", err)
	case !b[0].held:
		err = ErrNotHeld
		if h.count.Load() > 0 { // not an Unlock's release that ran first
			h.l.wd.lose(h)
		}
	default:
		h.ttl.Store(int64(ttl))
		h.renewedFor(ttl)
		if !h.l.wd.renewed(h, sent, ttl) {
			// The hold ended (or is being released) during the renewal.
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

// Unlock gives back this lease; the last lease of a hold releases the lock
// in Redis, handing it to the first waiter. Its context is cancelled (cause
// context.Canceled). The release ignores ctx's cancellation and deadline and
// is bounded by WithReleaseTimeout (default 1s); after a failure, calling
// Unlock again retries it. Errors: ErrNotHeld when already given back or no
// longer held (also ErrLockLost if lost); ErrUnavailable when Redis did not
// answer in time; ErrClosed after Close (the lock then expires after its TTL).
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

// drop takes s out of its hold and returns the leases left. The count drops
// before s's context ends: see docs/internals.md, "Re-entry".
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

// recordUnknown records a renewal to ttl of unknown outcome; the caller gives
// the lock back if h is lost (Extend; settle).
func (h *hold) recordUnknown(ttl time.Duration) {
	for {
		old := h.unknownTTL.Load()
		if int64(ttl) <= old || h.unknownTTL.CompareAndSwap(old, int64(ttl)) {
			return
		}
	}
}

// renewedFor clears an unknown renewal no longer than an answered one to ttl.
func (h *hold) renewedFor(ttl time.Duration) {
	if old := h.unknownTTL.Load(); old != 0 && old <= int64(ttl) {
		h.unknownTTL.CompareAndSwap(old, 0)
	}
}

// extendMayRun handles an Extend to ttl that failed with err, or whose
// re-take went unanswered (unseen): what may still run of it.
func (h *hold) extendMayRun(err error, unseen bool, ttl time.Duration) {
	if unseen || err == errNoAnswer {
		// A Redlock renewal's re-take of a node may still run (or the
		// renewal, which may re-take, still runs).
		h.retakes.Store(true)
	}
	if err != nil && err != ErrClosed && !neverRan(err) {
		// A renewal of unknown outcome: given back if h is lost already
		// (see docs/internals.md, "The watchdog").
		h.recordUnknown(ttl)
		if h.end.Load() == endLost && !h.l.mut.keepLateRenewal {
			h.giveBack()
		}
	}
}

// beginRelease readies h's release in Redis: a renewal that was in flight
// (renewing) or an Extend in flight may re-take a Redlock node that lost the
// hold (redlock.judgeRenewal) after the release, which then leaves done
// markers; an Extend that starts from now on sends nothing.
func (h *hold) beginRelease(renewing bool) {
	h.releasing.Store(true)
	if renewing || h.extending.Load() > 0 {
		h.retakes.Store(true)
	}
}

// markers names the nodes h's releases leave a done marker on: every node
// when a call of its owner may have run unanswered (uncertain) or a re-take
// may still run (retakes); else (Redlock) each node where an acquire,
// decided by a majority, may still run unseen.
func (h *hold) markers() markers {
	if h.uncertain.Load() {
		return allMarkers
	}
	if h.l.mut.blindRelease {
		return noMarkers
	}
	if h.retakes.Load() {
		return allMarkers
	}
	m := noMarkers
	for _, p := range h.unseen {
		m |= p.unseen()
	}
	return m
}

// endErr is the error of a call on h once it ended (nil while it is live).
func (h *hold) endErr() error { return endErrs[h.end.Load()] }

var endErrs = [endClosed + 1]error{endReleased: ErrNotHeld, endNotHeld: ErrNotHeld, endLost: fmt.Errorf("%w: %w", ErrNotHeld, ErrLockLost), endClosed: ErrClosed}

// releaseInRedis releases the whole hold in Redis (retry: after a failure).
func (h *hold) releaseInRedis(ctx context.Context, retry bool) error {
	if err := h.endErr(); err != nil {
		return err
	}
	l := h.l
	h.beginRelease(l.wd.remove(h))
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

// releaseBounded runs the release within h's release timeout, detached from
// ctx, retrying transient failures. See docs/design.md, "Redis layout".
func (l *Locker) releaseBounded(ctx context.Context, h *hold) (bool, error) {
	var endLate func(bool, error)
	if !l.ctxDeadlines { // else no late answer: no orphan
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
		lean := h.lean && !h.keys.perOwner()
		for {
			valid := l.clock() < h.validUntil.Load()
			var held bool
			var err error
			m := h.markers()
			lean = lean && m != allMarkers // every node marked: the script, as for uncertain
			if lean {
				held, err = l.be.releaseLean(cctx, &h.keys, h.owner, m)
			} else {
				held, err = l.be.release(cctx, &h.keys, h.owner, m)
			}
			switch {
			case err == nil && (held || !lean):
				return held, nil
			case lean:
				// Not lean now, or unanswered: the script tells, sent with its own
				// validity reading (a marker after an unanswered HDEL).
				lean = false
				if err == nil {
					continue
				}
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
	case err == errNoAnswer:
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

// leaseCtx is the lease's lifetime context; its owner value is the lease.
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

// Done and Err first end the lease as lost if its validity has passed, so
// that they tell the truth even when the watchdog's goroutine runs late.
func (c *leaseCtx) Done() <-chan struct{} { c.lease.checkValid(); return c.Context.Done() }

func (c *leaseCtx) Err() error { c.lease.checkValid(); return c.Context.Err() }

// checkValid ends s as lost if its hold (any part's, for a LockMulti) is
// past its validity or already lost, and the Observer hears of the loss from
// the watchdog's goroutine: see docs/internals.md, "The watchdog".
func (s *Lease) checkValid() {
	if s.parts == nil {
		s.checkHold()
		return
	}
	for _, p := range s.parts {
		if p.checkHold() {
			s.cancel(ErrLockLost)
			return
		}
	}
}

// checkHold is checkValid for a lease of one hold; true once it was lost.
func (s *Lease) checkHold() bool {
	h := s.h
	if h.l.mut.timerOnly {
		return false
	}
	switch h.end.Load() {
	case endLive:
		if h.validUntil.Load() > h.l.clock() || !h.l.wd.expire(h) {
			return false
		}
	case endLost:
		if s.ctx.Context.Err() != nil {
			return true // cancelled already
		}
	default:
		return false
	}
	s.cancel(ErrLockLost)
	return true
}
