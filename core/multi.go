package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// LockMulti takes every lock named in keys, or none: one lease holds them
// all. Its Context ends when any of them is lost (the cause is that lock's),
// Unlock releases them all, and Extend and TTL act on all of them. Its
// Fence is the highest of their fences, which orders holders of this set of
// names; a write to one name's data is fenced with that name's own fence,
// FenceOf(name) (names in different slots draw fences from different
// floors, on a Cluster from different nodes' clocks, so the highest of a
// set says nothing to a later holder of one name). Each lock is an
// ordinary lock (its own key, fence, queue and watchdog renewal), so a Lock
// or TryLock of one of the names excludes, and is excluded by, a LockMulti
// that names it.
//
// The names are taken one after the other in sorted order (duplicates
// count once), each waiting in its FIFO queue as Lock does, all within one
// wait budget (WithWait, as for Lock; it bounds the whole call, plus at
// most 50ms). Every caller takes any two names in the same order, so sets
// that overlap, given in any order, never deadlock: whoever holds the first
// shared name is the only one waiting for the next. When a name cannot be
// taken in time the ones already taken are given back: released when
// LockMulti returns, or, if Redis is slow to answer, in the background
// (the call still returns within its budget). On a Cluster the names may
// be in different slots: the same holds, since each lock lives in one
// slot. It costs one round trip per name uncontended. (A name that ctx
// already holds is re-entered, so it is held before the others, out of
// order: the no-deadlock promise is for calls that hold none of their names
// beforehand.)
//
// A Lock of one of the names with the lease's Context (or a context derived
// from it) re-enters that lock. The lease's Key is the sorted names joined
// by commas (Keys returns them); Pattern is the first one's.
//
// Errors: as for Lock (ErrInvalid also for an empty keys); a busy error
// names the lock that could not be taken.
func (l *Locker) LockMulti(ctx context.Context, keys []string, opts ...LockOption) (*Lease, error) {
	if len(keys) == 0 {
		return nil, invalidf("keys is empty")
	}
	names := slices.Clone(keys)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, name := range names {
		if err := validateKey(name); err != nil {
			return nil, err // before any is taken
		}
	}
	var o callOptions
	l.callOptions(&o, opts)
	if o.err != nil {
		return nil, o.err // before any is taken
	}
	budget := o.attemptTimeout
	if o.wait > 0 {
		budget = o.wait
	}
	until := time.Now().Add(budget)
	parts := make([]*Lease, 0, len(names))
	for _, name := range names {
		s, err := l.lockUntil(ctx, name, opts, true, until)
		if err != nil {
			giveBack(parts, until.Add(replyGrace))
			return nil, err
		}
		parts = append(parts, s)
	}
	return newMulti(ctx, parts), nil
}

// giveBack releases the locks a LockMulti took before it failed as a Lock
// whose answer came late is undone (once, inline, when the Locker is
// closing, so that a Close it overlaps leaves nothing held), and waits for
// the releases until by: a healthy Redis has released them when LockMulti
// returns, a slow one finishes in the background, within the call's
// budget. A name the call re-entered stays with the lease it re-entered.
func giveBack(parts []*Lease, by time.Time) {
	var dones []chan struct{}
	for _, p := range parts {
		p.unlocked.Store(true)
		p.cancel(context.Canceled)
		h := p.h
		if h.count.Add(-1) > 0 {
			continue
		}
		h.end.CompareAndSwap(endLive, endReleased)
		h.l.wd.remove(h)
		done := make(chan struct{})
		dones = append(dones, done)
		h.l.undoThen(&h.keys, h.owner, &callOptions{ttl: time.Duration(h.ttl.Load()), releaseTimeout: h.release}, done)
	}
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	for _, done := range dones {
		select {
		case <-done:
		case <-t.C:
			return
		}
	}
}

// newMulti makes the lease of a LockMulti that took parts: its context
// derives from ctx and ends, with the part's cause, when any part's does.
func newMulti(ctx context.Context, parts []*Lease) *Lease {
	m := &Lease{parts: parts, parent: leaseFrom(ctx)}
	inner, cancel := context.WithCancelCause(ctx)
	m.ctx, m.cancel = leaseCtx{Context: inner, lease: m}, cancel
	for _, p := range parts {
		pctx := p.Context()
		if pctx.Err() != nil {
			// Lost while the call took the others: ended from the start
			// (AfterFunc would cancel it only later, on a goroutine).
			cancel(context.Cause(pctx))
			break
		}
		context.AfterFunc(pctx, func() { cancel(context.Cause(pctx)) })
	}
	return m
}

// Keys returns the names the lease holds: one for a Lock's, the sorted
// names of a LockMulti's. Nil for a nil lease.
func (s *Lease) Keys() []string {
	switch {
	case s == nil:
		return nil
	case s.parts == nil:
		return []string{s.h.key}
	}
	keys := make([]string, len(s.parts))
	for i, p := range s.parts {
		keys[i] = p.h.key
	}
	return keys
}

// multiFence is the highest fence of a LockMulti's parts.
func (s *Lease) multiFence() int64 {
	var f int64
	for _, p := range s.parts {
		f = max(f, p.h.fence)
	}
	return f
}

// multiValid is the earliest validity end of a LockMulti's parts.
func (s *Lease) multiValid() time.Time {
	v := s.parts[0].Valid()
	for _, p := range s.parts[1:] {
		if pv := p.Valid(); pv.Before(v) {
			v = pv
		}
	}
	return v
}

// multiTTL is the shortest remaining TTL of a LockMulti's parts, or the
// parts' errors.
func (s *Lease) multiTTL(ctx context.Context) (time.Duration, error) {
	ttls, err := eachPart(s.parts, func(p *Lease) (time.Duration, error) { return p.TTL(ctx) })
	if err != nil {
		return 0, err
	}
	return slices.Min(ttls), nil
}

// multiExtend extends every part of a LockMulti; its error is the parts'
// errors joined (a part not held ends the lease's Context).
func (s *Lease) multiExtend(ctx context.Context, ttl time.Duration) error {
	_, err := eachPart(s.parts, func(p *Lease) (struct{}, error) { return struct{}{}, p.Extend(ctx, ttl) })
	return err
}

// multiUnlock releases every part of a LockMulti that has not been given
// back (a second Unlock retries the releases that failed); ErrNotHeld once
// all were.
func (s *Lease) multiUnlock(ctx context.Context) error {
	if s.unlocked.CompareAndSwap(false, true) {
		s.cancel(context.Canceled)
	}
	var left []*Lease
	for _, p := range s.parts {
		if !p.gaveBack.Load() {
			left = append(left, p)
		}
	}
	if len(left) == 0 {
		return ErrNotHeld
	}
	return unlockAll(ctx, left)
}

// unlockAll releases parts at once (each within its release timeout) and
// joins their errors.
func unlockAll(ctx context.Context, parts []*Lease) error {
	_, err := eachPart(parts, func(p *Lease) (struct{}, error) { return struct{}{}, p.Unlock(ctx) })
	return err
}

// eachPart runs call on every part at once and returns their results, in
// order, and their errors joined.
func eachPart[T any](parts []*Lease, call func(*Lease) (T, error)) ([]T, error) {
	res := make([]T, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { res[i], errs[i] = call(p) })
	}
	wg.Wait()
	return res, joinErrors(errs)
}

// joinErrors is errs joined, or, when every one that is not nil is the
// same error, that error as it is (so that err == ErrNotHeld holds when no
// part is held).
func joinErrors(errs []error) error {
	var first error
	same := true
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		case err != first:
			same = false
		}
	}
	if same {
		return first
	}
	return errors.Join(errs...)
}

// FenceOf returns the fence of the lock named key that the lease holds:
// for a LockMulti's lease, that name's own fence, to fence a write to that
// name's data; for a Lock's, its Fence when key is its name. Zero when the
// lease does not hold key.
func (s *Lease) FenceOf(key string) int64 {
	switch {
	case s == nil:
		return 0
	case s.parts == nil:
		if s.h.key == key {
			return s.h.fence
		}
		return 0
	}
	for _, p := range s.parts {
		if p.h.key == key {
			return p.h.fence
		}
	}
	return 0
}

// multiReentrant reports whether every lock of a LockMulti's lease was
// re-entered (held before by a lease of ctx's chain).
func (s *Lease) multiReentrant() bool {
	for _, p := range s.parts {
		if !p.reentrant {
			return false
		}
	}
	return true
}

// multiKey is a LockMulti lease's Key: its names joined by commas.
func (s *Lease) multiKey() string { return strings.Join(s.Keys(), ",") }
