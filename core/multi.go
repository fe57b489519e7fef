package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// LockMulti takes every lock named in keys, or none, and returns one lease
// for all. The names are taken one by one in sorted order (duplicates count
// once), so overlapping sets never deadlock, within one wait budget
// (WithWait, as for Lock, plus at most 50ms); the ones taken are given back
// if one cannot be had. The lease's Context ends when any lock is lost;
// Unlock, Extend and TTL act on all; Key joins the names with commas; Fence
// is the highest: fence a write to one name's data with FenceOf(name).
// See docs/usage.md, "LockMulti in detail".
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
		s, err := l.lockUntil(ctx, name, opts, true, until, false)
		if err != nil {
			giveBack(parts, until.Add(replyGrace))
			return nil, err
		}
		parts = append(parts, s)
	}
	return newMulti(ctx, parts), nil
}

// giveBack undoes the locks a failed LockMulti took (re-entered names stay)
// and waits for the releases until by; the rest finish in the background.
func giveBack(parts []*Lease, by time.Time) {
	var dones []chan struct{}
	for _, p := range parts {
		p.unlocked.Store(true)
		h := p.h
		if p.drop() > 0 {
			continue
		}
		h.end.CompareAndSwap(endLive, endReleased)
		h.l.wd.remove(h)
		done := make(chan struct{})
		dones = append(dones, done)
		h.l.undo(&h.keys, h.owner, h.undoOptions(), done)
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

// newMulti makes a LockMulti's lease: its context ends when any part's does.
func newMulti(ctx context.Context, parts []*Lease) *Lease {
	m := &Lease{parts: parts, parent: FromContext(ctx)}
	inner, cancel := context.WithCancelCause(ctx)
	m.ctx, m.cancel = leaseCtx{Context: inner, lease: m}, cancel
	for _, p := range parts {
		pctx := p.Context()
		if pctx.Err() != nil {
			// Already lost: end now (AfterFunc would cancel it only later).
			cancel(context.Cause(pctx))
			break
		}
		context.AfterFunc(pctx, func() { cancel(context.Cause(pctx)) })
	}
	return m
}

// Keys returns the lease's names (a LockMulti's sorted); nil for a nil lease.
func (s *Lease) Keys() []string {
	if s == nil {
		return nil
	}
	var keys []string
	for _, p := range s.each() {
		keys = append(keys, p.h.key)
	}
	return keys
}

// each is the leases of s's holds: a LockMulti's parts, or s itself.
func (s *Lease) each() []*Lease {
	if s.parts == nil {
		return []*Lease{s}
	}
	return s.parts
}

// multiUnlock releases the parts not yet given back (so a second Unlock
// retries failed releases); ErrNotHeld once all were.
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
	_, err := eachPart(left, func(p *Lease) (struct{}, error) { return struct{}{}, p.Unlock(ctx) })
	return err
}

// eachPart runs call on every part concurrently: results in order, errors joined.
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

// joinErrors joins errs, or returns the one error they all are (so that
// err == ErrNotHeld holds when no part is held).
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

// FenceOf returns the lease's fence for the lock named key: for a
// LockMulti's lease that name's own fence, for a Lock's its Fence. Zero when
// the lease does not hold key.
func (s *Lease) FenceOf(key string) int64 {
	if s == nil {
		return 0
	}
	for _, p := range s.each() {
		if p.h.key == key {
			return p.h.fence
		}
	}
	return 0
}
