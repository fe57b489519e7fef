package core

import (
	"context"
	"errors"
	"math/rand/v2"
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
	waits    bool      // a Lock with a wait budget: it queues in Redis
	deadline time.Time // end of the wait budget or of ctx; zero: none
	ctxEnds  bool      // deadline is ctx's
	attempts int

	// refreshes of the queue entry: sentAt[i] is when refresh i+1 was sent
	// (monotonic ns), the moment a hold granted on it is valid from
	sentAt []int64

	unavail  error         // Redlock: the last attempt had too few nodes answering
	busySeen bool          // a busy answer was received
	holder   time.Duration // how long to wait, as the last busy answer said
	holderAt time.Time     // when it was seen

	// observations (Event)
	tag       any    // the caller's holder tag (WithHolderTag), nil without a tag function
	holderTag string // the last holder tag a busy answer carried
	waited    bool   // the call waited in the queue
	offset    time.Duration
	sampled   bool // offset is an estimate of the server's clock
}

// busy is the error of a call that last saw the lock busy.
func (a *acquisition) busy() error {
	left := max(a.holder-time.Since(a.holderAt), 0)
	return &BusyError{Key: a.key, RetryAfter: a.l.hints.hint(left), HolderTTL: left}
}

// expired is the error of a call whose deadline passed while no attempt
// was in flight: busy, joined with context.DeadlineExceeded when the
// deadline was ctx's (ctx.Done may not have fired yet).
func (a *acquisition) expired() error {
	last := a.busy()
	if a.unavail != nil {
		last = a.unavail // a Redlock whose last attempt had too few nodes
	}
	if a.ctxEnds {
		return errors.Join(last, context.DeadlineExceeded)
	}
	return last
}

// ended is the error of a call whose ctx ended while no attempt was in
// flight: the context's error, joined with busy when a busy answer was seen.
func (a *acquisition) ended(ctx context.Context) error {
	if a.unavail != nil {
		return errors.Join(a.unavail, ctxErr(ctx))
	}
	if a.busySeen {
		return errors.Join(a.busy(), ctxErr(ctx))
	}
	return ctxErr(ctx)
}

// refresh is how often a waiter refreshes its queue entry (and retries, in
// case a notification was lost): a third of its TTL. Its entry lives one and
// a half of those, so that a waiter that is gone is skipped, not granted, at
// most that long after its last refresh.
func refresh(ttl time.Duration) time.Duration { return ttl / 3 }

func entryTTL(ttl time.Duration) time.Duration { return refresh(ttl) * 3 / 2 }

func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	l := a.l
	if l.opts.tag != nil && a.tag == nil {
		// Only calls that go to Redis store a tag: a re-entry never asks.
		a.tag = holderTag(l.opts.tag(ctx))
	}
	if err := l.checkServer(ctx, a.deadline); err != nil {
		return nil, err
	}
	s, err := a.attempt(ctx)
	if s != nil || err != nil || !a.waits {
		if s == nil && err == nil {
			err = a.busy()
		}
		return s, err
	}
	// Queued in Redis: wait to be handed the lock by a release (told on
	// the lock's channel), refreshing the entry every refresh interval —
	// which also retries, should a notification be lost.
	w := l.join(a.keys.hash(), a.owner)
	if w == nil {
		a.undo()
		return nil, ErrClosed
	}
	defer l.leave(w)
	a.waited = true
	l.observe(ctx, Event{Kind: EventWaiting, Key: a.key, Pattern: a.o.pattern, Attempts: a.attempts, HolderTag: a.holderTag})
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	every := refresh(a.o.ttl)
	for {
		remaining := time.Until(a.deadline)
		if remaining <= 0 {
			a.undo() // leave the queue (and pass the lock on, if it came meanwhile)
			return nil, a.expired()
		}
		sleep := min(remaining, every)
		if a.busySeen {
			// The holder's TTL runs out then, unless renewed: the lock is
			// free for the first waiter though no release tells anyone.
			sleep = min(sleep, max(a.holder-time.Since(a.holderAt), 0)+time.Millisecond)
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			a.undo()
			return nil, a.ended(ctx)
		case <-l.done:
			a.undo()
			return nil, ErrClosed
		case g := <-w.granted:
			if s, err := a.granted(ctx, g); s != nil || err != nil {
				return s, err
			}
			continue
		case g := <-w.handed:
			// Another waiter has it: if that one is gone, the lock is free
			// when its first expiry passes.
			a.busySeen, a.holder, a.holderAt = true, g.life, time.Now()
			continue
		case <-w.wake:
			if l.redlock != nil {
				// Every waiter of every Locker hears a Redlock release:
				// spread their attempts (the holder timer, after a random
				// delay), or they split the nodes.
				a.busySeen, a.holder, a.holderAt = true, jitter(0), time.Now()
				continue
			}
		case <-timer.C:
			if sleep == remaining {
				continue // the budget's end: no attempt, it would have none left
			}
		}
		s, err := a.attempt(ctx)
		if s != nil || err != nil {
			return s, err
		}
		select {
		case g := <-w.granted: // handed over while the attempt ran
			if s, err := a.granted(ctx, g); s != nil || err != nil {
				return s, err
			}
		default:
		}
	}
}

// granted builds the lease a release handed to this waiter: its hold
// lives, until it is renewed (at a third of that life), as long as the queue entry of
// refresh g.seq would have, so it is valid from that refresh's send time.
// A grant that arrives too late to be of use, or after ctx ended, is passed
// on (nil, nil: keep waiting; or the context's error).
func (a *acquisition) granted(ctx context.Context, g grant) (*Lease, error) {
	if g.seq < 1 || g.seq > len(a.sentAt) {
		return nil, nil // not a refresh of ours: a copy from an earlier owner id cannot be
	}
	ttl := entryTTL(a.o.ttl)
	validUntil := a.sentAt[g.seq-1] + int64(ttl-a.l.drift(ttl))
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx)
	}
	if a.l.mono() >= validUntil {
		a.undo() // gives it to the next waiter; our next attempt queues again
		return nil, nil
	}
	if a.l.opts.ackN > 0 {
		// Replicas must acknowledge the hold before it is used: claim it
		// now (the acquire script renews its own owner's hold) and WAIT.
		return a.attempt(ctx)
	}
	// It claims its TTL at a third of this first life, as a fresh hold
	// renews at a third of its TTL: a hold released sooner never does.
	now := a.l.mono()
	return a.newHold(ctx, g.fence, validUntil, now+(validUntil-now)/3, true)
}

type acquireResult struct {
	fence  int64
	wait   time.Duration
	holder string
	err    error
}

// attempt sends the acquire script once (for a waiting caller, a refresh of
// its queue entry), bounded by the call's deadline. It returns a lease, or
// nil and nil when the lock is busy, or an error.
func (a *acquisition) attempt(ctx context.Context) (*Lease, error) {
	l, o := a.l, a.o
	a.attempts++
	sent := l.mono()
	entry, seq := noEntry, 0
	if a.waits {
		entry = o.entryArg
		a.sentAt = append(a.sentAt, sent)
		seq = len(a.sentAt)
	}
	owner := a.owner // a Redlock split changes a.owner; a late result is this one's
	var wall time.Time
	if l.opts.observer != nil {
		wall = time.Now()
	}
	r, err := bounded(l, ctx, a.deadline, func(cctx context.Context) acquireResult {
		fence, wait, holder, err := l.be.acquire(cctx, &a.keys, owner, o.ttlArg, entry, seq, a.tag)
		return acquireResult{fence, wait, holder, err}
	}, func(r acquireResult) {
		if r.err == errEnded || a.cross != nil || r.err == nil && r.fence == 0 && !a.waits {
			return // nothing to undo
		}
		a.undoOwner(owner)
	})
	if err == nil && (r.err == nil || r.err == errSplit) {
		l.undos.answered() // Redis answers: undos waiting for it go now
	}
	if err == nil && r.err == errSplit {
		// Redlock: some nodes granted, too few for a majority.
		a.undoOwner(owner)
		a.again()
		return nil, nil
	}
	switch {
	case err == errLate:
		err = unavailable("acquire", errNoAnswer)
		if a.unavail != nil {
			err = errors.Join(err, a.unavail) // a Redlock's earlier attempts name their nodes
		}
		if ctx.Err() != nil {
			err = errors.Join(err, ctxErr(ctx))
		}
		return nil, err
	case err != nil:
		return nil, err
	case r.err != nil:
		a.undo() // it may have taken the lock (or queued) before failing
		// The call's context is not the caller's (bounded detaches it):
		// a context error here is the budget ending before Redis answered.
		err := unavailable("acquire", r.err)
		if ctx.Err() != nil {
			err = errors.Join(err, ctxErr(ctx))
		} else if l.redlock != nil && a.waits && a.cross == nil {
			// Redlock: too few nodes answered this time; retry within the
			// budget, and tell unavailable only if that is still so when
			// the budget ends.
			a.again()
			a.unavail = err
			return nil, nil
		}
		return nil, err
	case r.fence == 0:
		a.busySeen, a.holder, a.holderAt = true, r.wait, time.Now()
		a.unavail = nil
		if r.holder != "" {
			a.holderTag = r.holder
		}
		return nil, nil
	}
	if !wall.IsZero() && a.attempts == 1 && a.cross == nil {
		// A first attempt's fence is the server's clock when the script
		// ran (a later one's may be a grant's, issued earlier), against
		// the midpoint of the round trip (the answer was just delivered).
		a.offset = time.UnixMicro(r.fence).Sub(wall.Add(time.Since(wall) / 2))
		a.sampled = true
	}
	if c := a.cross; c != nil && r.fence == c.fence {
		// The lock the other Locker holds: re-enter its hold.
		if s := c.reenter(ctx); s != nil {
			return s, nil
		}
		a.busySeen, a.holder, a.holderAt = true, 0, time.Now()
		return nil, a.busy() // its last lease is being released
	}
	validUntil := sent + int64(o.ttl-l.drift(o.ttl))
	if l.mono() >= validUntil {
		// The reply came too late to leave any validity: give it back.
		a.undo()
		return nil, unavailable("acquire", errors.New("reply arrived after the lease's validity"))
	}
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx)
	}
	return a.newHold(ctx, r.fence, validUntil, sent+int64(o.ttl/3), false)
}

// newHold makes the hold of a lock this call obtained and its first lease
// (newHeld) and hands the hold to the watchdog.
func (a *acquisition) newHold(ctx context.Context, fence, validUntil, renewAt int64, claim bool) (*Lease, error) {
	l := a.l
	s := newHeld(ctx, l, a.key, a.keys, a.owner, a.o, fence, validUntil, renewAt, claim)
	if !l.wd.add(s.h) {
		a.undo()
		return nil, ErrClosed
	}
	return s, nil
}

// undo releases the hold this call's attempts may have added, or its place
// in the queue.
func (a *acquisition) undo() { a.undoOwner(a.owner) }

func (a *acquisition) undoOwner(owner string) {
	if a.cross == nil {
		a.l.undo(&a.keys, owner, a.o)
	}
}

// again readies a Redlock acquisition whose attempt may have left grants
// (given back by the caller under the old owner) for another attempt: under
// a new owner, since the old one's done markers make its attempts no-ops,
// and after a random delay (the wait loop's holder timer), so that owners
// that split the nodes do not split them again.
func (a *acquisition) again() {
	if a.cross == nil {
		a.owner = newOwnerID()
	}
	a.busySeen, a.holder, a.holderAt = true, jitter(0), time.Now()
}

// jitter is a random wait in [1ms, 1ms + max(d, 10ms)): after a Redlock
// split, owners that raced try again at different moments.
func jitter(d time.Duration) time.Duration {
	return time.Millisecond + time.Duration(rand.Int64N(int64(max(d, 10*time.Millisecond))))
}

var noEntry any = ""
