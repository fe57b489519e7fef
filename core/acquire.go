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
	o        callOptions
	owner    ownerID
	waits    bool      // a Lock with a wait budget: it queues in Redis
	deadline time.Time // end of the wait budget or of ctx; zero: none
	ctxEnds  bool      // deadline is ctx's
	attempts int

	// sentAt[i]: when refresh i+1 of the queue entry was sent (monotonic ns),
	// which a grant on it is valid from; starts in firstSent (no allocation)
	sentAt    []int64
	firstSent [1]int64

	// uncertain: an attempt may have run unseen; the release then leaves a done marker
	uncertain bool
	// unseen: the owner's attempts whose calls may still run unseen
	// (acquireReply.unseen); the hold keeps them (hold.markers)
	unseen []*pending

	unavail error         // the last attempt failed (Redlock: too few nodes answered)
	retryIn time.Duration // the wait after the last failed attempt; it doubles while they fail
	nextTry time.Time     // a waiter's next attempt is due then, whatever wakes it (zero: none)
	holder  holderSeen    // the holder, as the last busy answer (or handover) told

	tag    any  // the caller's holder tag (WithHolderTag), nil without a tag function
	waited bool // the call waited in the queue
	obs    observed
}

// attempt sends the acquire script once (for a waiter, also a refresh of its
// entry) within the call's deadline. It returns a lease, an error that ends
// the call, or neither: busy, or a failure the call may retry.
func (a *acquisition) attempt(ctx context.Context) (*Lease, error) {
	return a.settle(ctx, a.try(ctx))
}

// tried is one sent acquire: its reply or error, the owner it was sent for,
// and when (monotonic ns; wall: the wall clock then, if observed).
type tried struct {
	r     acquireReply
	err   error
	owner ownerID
	sent  int64
	wall  time.Time
}

// try sends the acquire script once within the call's deadline. A reply
// that comes after the deadline is undone when it arrives.
func (a *acquisition) try(ctx context.Context) tried {
	l, o := a.l, &a.o
	a.attempts++
	t := tried{owner: a.owner, sent: l.clock()} // owner: a late result is this one's
	entry, seq := noEntry, 0
	if a.waits {
		entry = o.entryArg
		a.sentAt = append(a.sentAt, t.sent)
		seq = len(a.sentAt)
	}
	a.nextTry = time.Time{}
	if l.opts.observer != nil {
		t.wall = time.Now()
	}
	var undoLate func(acquireReply, error)
	if !l.ctxDeadlines { // else no late answer: no orphan
		undoLate = func(r acquireReply, err error) {
			if neverRan(err) || err == nil && (r.found == foundEnded || r.found == foundBusy && !a.waits) {
				return // nothing to undo
			}
			a.undoOwner(t.owner)
		}
	}
	t.r, t.err = boundedProbed(l, ctx, a.deadline, !a.waits || !l.retriesRefusals(), func(cctx context.Context) (acquireReply, error) {
		return l.be.acquire(cctx, &a.keys, t.owner, o.ttlArg, entry, seq, a.tag)
	}, undoLate)
	if t.err == nil {
		l.answered() // Redis answers: undos waiting for it go now
	}
	return t
}

// settle is what the call makes of try's t: a lease, an error that ends the
// call, or neither (busy: the holder as told is noted; or a failure the call
// retries). Every answer but held and ended counts as busy.
func (a *acquisition) settle(ctx context.Context, t tried) (*Lease, error) {
	switch {
	case t.err != nil:
		return nil, a.failed(ctx, t.err)
	case t.r.found == foundHeld:
		return a.took(ctx, t.r.fence, t.sent, t.wall)
	case t.r.found == foundEnded:
		return nil, a.failed(ctx, errEnded)
	}
	a.holder = holderSeen{ttl: t.r.wait, at: time.Now()}
	a.unavail, a.retryIn = nil, 0
	a.obs.sawHolder(t.r.holder)
	return nil, nil
}

// late is the error of an attempt not answered within the budget.
func (a *acquisition) late(ctx context.Context) error {
	err := unavailable("acquire", errNoAnswer)
	if a.unavail != nil {
		err = errors.Join(err, a.unavail) // a Redlock's earlier attempts name their nodes
	}
	if ctx.Err() != nil {
		err = errors.Join(err, ctxErr(ctx))
	}
	return err
}

// errEnded: Redis found this call's hold or wait already ended (undone).
var errEnded = errors.New("this acquisition already ended")

// failed handles an attempt that ended in err: nil when the call
// retries within its budget, else its error.
func (a *acquisition) failed(ctx context.Context, err error) error {
	l := a.l
	switch {
	case err == ErrClosed:
		return err
	case isPermits(err):
		if a.waited {
			a.undo() // leave the queue
		}
		return err
	case err != errEnded && !neverRan(err):
		a.uncertain = true // it may have run, or may still run
	}
	if err == errNoAnswer {
		return a.late(ctx)
	}
	// bounded detaches the context: a context error here is the budget's end.
	cause := err
	err = unavailable("acquire", withCause(cause))
	switch {
	case ctx.Err() != nil:
		err = errors.Join(err, ctxErr(ctx))
	case a.waited && cause != errEnded && (!definitive(cause) || l.failingOver(cause)),
		a.waits && (transient(cause) || l.failingOver(cause)):
		// A failure that may pass: retry under the same owner, keeping the
		// queue place. See docs/topologies.md, "A refused dial during a failover".
		a.retryAfter(cause, err)
		return nil
	}
	if !neverRan(cause) || a.uncertain || a.waited && !l.mut.keepEntry {
		// It may hold or be queued; a queued entry stays live (mutant keep-entry).
		// See docs/internals.md, "Waiting (`wait.go`, `acquire.go`)".
		a.undo()
	}
	return err
}

// took makes the lease of an attempt sent at sent (monotonic ns; wall: the
// wall clock then, if observed) that answered fence.
func (a *acquisition) took(ctx context.Context, fence, sent int64, wall time.Time) (*Lease, error) {
	l, o := a.l, &a.o
	if !wall.IsZero() && a.attempts == 1 {
		a.obs.sampleClock(fence, wall) // a later fence may be an older grant's
	}
	validUntil := sent + int64(o.ttl-l.drift(o.ttl))
	if l.clock() >= validUntil {
		// The reply came too late to leave any validity: give it back.
		a.undo()
		return nil, unavailable("acquire", errors.New("reply arrived after the lease's validity"))
	}
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx)
	}
	return a.newHold(ctx, fence, validUntil, sent+int64(o.ttl/3), false)
}

// newHold makes the hold and its first lease and hands it to the watchdog.
func (a *acquisition) newHold(ctx context.Context, fence, validUntil, renewAt int64, handedOver bool) (*Lease, error) {
	l, o := a.l, &a.o
	h := &hold{
		l:          l,
		key:        a.key,
		keys:       a.keys,
		owner:      a.owner,
		fence:      fence,
		acquired:   time.Now(),
		watchdog:   o.watchdog,
		release:    o.releaseTimeout,
		renewAt:    renewAt,
		handedOver: handedOver,
		lean:       !handedOver && !a.waited && (a.tag == nil || a.tag == ""),
		pattern:    o.pattern,
		heapIndex:  -1,
		parentDone: ctx.Done(),
	}
	h.count.Store(1)
	h.ttl.Store(int64(o.ttl))
	h.validUntil.Store(validUntil)
	s := newLease(h, ctx, false)
	h.first = s
	h.uncertain.Store(a.uncertain)
	h.unseen = a.unseen
	if !l.wd.add(h) {
		a.undo()
		return nil, ErrClosed
	}
	return s, nil
}

// newOwner gives the call a new owner id and drops the old owner's calls that
// may still run (unseen): that owner is undone with done markers.
func (a *acquisition) newOwner() { a.owner, a.unseen = a.keys.newOwner(), nil }

// undo releases what this call's attempts may hold, or its queue place.
func (a *acquisition) undo() { a.undoOwner(a.owner) }

func (a *acquisition) undoOwner(owner ownerID) { a.l.undo(&a.keys, owner, &a.o, nil) }

var noEntry any = ""
