package core

import (
	"context"
	"errors"
	"time"
)

// acquisition is one Lock or TryLock call that goes to Redis.
type acquisition struct {
	l        *Locker
	key      string
	keys     lockKeys // addressed by the hold: no copy
	o        *callOptions
	owner    string
	cross    *hold     // the hold of another Locker this call may re-enter
	waits    bool      // a Lock with a wait budget (claims turns, queues)
	deadline time.Time // end of the wait budget or of ctx; zero: none
	ctxEnds  bool      // deadline is ctx's
	attempts int

	busySeen bool          // a busy answer was received
	holder   time.Duration // holder's remaining TTL at the last busy answer
	holderAt time.Time     // when it was seen
}

// busy is the error of a call that last saw the lock busy; w (may be nil)
// is its place in the Locker's queue, whose head may have seen the holder
// more recently.
func (a *acquisition) busy(w *waiter) error {
	ttl, at := a.holder, a.holderAt
	if w != nil {
		if t, when := a.l.room.holder(w); when.After(at) {
			ttl, at = t, when
		}
	}
	left := max(ttl-time.Since(at), 0)
	return &BusyError{Key: a.key, RetryAfter: a.l.hints.hint(left), HolderTTL: left}
}

// expired is the error of a call whose deadline passed while no attempt
// was in flight: busy, joined with context.DeadlineExceeded when the
// deadline was ctx's (ctx.Done may not have fired yet).
func (a *acquisition) expired(w *waiter) error {
	if a.ctxEnds {
		return errors.Join(a.busy(w), context.DeadlineExceeded)
	}
	return a.busy(w)
}

// ended is the error of a call whose ctx ended while no attempt was in
// flight: the context's error, joined with busy when a busy answer was seen.
func (a *acquisition) ended(ctx context.Context, w *waiter) error {
	if a.busySeen || (w != nil && !a.l.room.isHead(w)) {
		return errors.Join(a.busy(w), ctxErr(ctx))
	}
	return ctxErr(ctx)
}

func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	l := a.l
	if err := l.checkServer(ctx, a.deadline); err != nil {
		return nil, err
	}
	// Go straight to Redis unless callers of this Locker already queue for
	// the key (then queue behind them, FIFO). A call that may re-enter a
	// hold of another Locker always tries first: it must not queue behind
	// waiters that wait for it.
	if !a.waits || a.cross != nil || l.room.idle(a.keys.hash()) {
		s, err := a.attempt(ctx)
		if s != nil || err != nil {
			return s, err
		}
		if !a.waits {
			return nil, a.busy(nil)
		}
		if !time.Now().Before(a.deadline) {
			return nil, a.expired(nil)
		}
	}
	w := l.room.join(a.keys.hash())
	if w == nil {
		return nil, ErrClosed
	}
	obtained := false
	defer func() { l.room.leave(w, obtained) }()
	if a.busySeen {
		l.room.setHolder(w, a.holder, a.holderAt)
	}

	retry := a.o.retry()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		remaining := time.Until(a.deadline)
		if remaining <= 0 {
			return nil, a.expired(w)
		}
		head := l.room.isHead(w)
		sleep := remaining
		if head {
			if b := retry.NextBackoff(); b > 0 {
				sleep = min(sleep, b)
			}
			if a.busySeen {
				sleep = min(sleep, max(a.holder-time.Since(a.holderAt), 0)+time.Millisecond)
			}
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return nil, a.ended(ctx, w)
		case <-l.done:
			return nil, ErrClosed
		case <-w.wake:
		case <-w.promoted:
			continue // now the head: re-arm the timer with the backoff
		case <-timer.C:
			if !head {
				continue
			}
		}
		if !l.room.isHead(w) {
			continue
		}
		s, err := a.attempt(ctx)
		if s != nil {
			obtained = true
		}
		if s != nil || err != nil {
			return s, err
		}
		l.room.setHolder(w, a.holder, a.holderAt)
	}
}

type acquireResult struct {
	fence  int64
	holder time.Duration
	err    error
}

// attempt sends the acquire script once, bounded by the call's deadline.
// It returns a lease, or nil and nil when the lock is busy, or an error.
func (a *acquisition) attempt(ctx context.Context) (*Lease, error) {
	l, o := a.l, a.o
	a.attempts++
	sent := l.mono()
	reserve := noReserve
	if a.waits {
		reserve = l.idArg
	}
	r, err := bounded(l, ctx, a.deadline, func(cctx context.Context) acquireResult {
		fence, holder, err := l.be.acquire(cctx, &a.keys, a.owner, o.ttlArg, reserve)
		return acquireResult{fence, holder, err}
	}, func(r acquireResult) {
		if r.err == nil && r.fence == 0 || r.err == errEnded || a.cross != nil {
			return // busy: nothing to undo
		}
		a.undo()
	})
	if err == nil && r.err == nil {
		l.undos.answered() // Redis answers: undos waiting for it go now
	}
	switch {
	case err == errLate:
		err = unavailable("acquire", errNoAnswer)
		if ctx.Err() != nil {
			err = errors.Join(err, ctxErr(ctx))
		}
		return nil, err
	case err != nil:
		return nil, err
	case r.err != nil:
		if a.cross == nil {
			a.undo() // it may have taken the lock before failing
		}
		// The call's context is not the caller's (bounded detaches it):
		// a context error here is the budget ending before Redis answered.
		err := unavailable("acquire", r.err)
		if ctx.Err() != nil {
			err = errors.Join(err, ctxErr(ctx))
		}
		return nil, err
	case r.fence == 0:
		a.busySeen, a.holder, a.holderAt = true, r.holder, time.Now()
		return nil, nil
	}
	if c := a.cross; c != nil && r.fence == c.fence {
		// The lock the other Locker holds: re-enter its hold.
		if s := c.reenter(ctx); s != nil {
			return s, nil
		}
		a.busySeen, a.holder, a.holderAt = true, 0, time.Now()
		return nil, a.busy(nil) // its last lease is being released
	}
	validUntil := sent + int64(o.ttl-l.drift(o.ttl))
	if l.mono() >= validUntil {
		// The reply came too late to leave any validity: give it back.
		a.undo()
		return nil, unavailable("acquire", errors.New("reply arrived after the lease's validity"))
	}
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx, nil)
	}
	h := &hold{
		l:        l,
		key:      a.key,
		keys:     a.keys,
		owner:    a.owner,
		ownerArg: a.owner,
		fence:    r.fence,
		acquired: time.Now(),
		watchdog: o.watchdog,
		release:  o.releaseTimeout,
		renewAt:  sent + int64(o.ttl/3),
		hidx:     -1,
	}
	h.count.Store(1)
	h.ttl.Store(int64(o.ttl))
	h.validUntil.Store(validUntil)
	s := newLease(h, ctx, false)
	h.first = s
	if !l.wd.add(h) {
		a.undo()
		return nil, ErrClosed
	}
	return s, nil
}

// undo releases the hold this call's attempts may have added.
func (a *acquisition) undo() {
	if a.cross == nil {
		a.l.undo(&a.keys, a.owner, a.o)
	}
}

var noReserve any = ""
