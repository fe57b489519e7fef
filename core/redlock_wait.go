package core

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// runRedlock is a Redlock acquisition, whose waiters do not queue in Redis,
// from the turn to the lease: a waiting call waits for its turn among this
// Locker's callers of the lock (turns), then tries on every node, sleeping
// between tries (next) until the holder's TTL as told runs out, a failed
// try's backoff ends, its refresh interval (TTL/3) passes, or 1-11ms after
// a release said the lock is free. A busy TryLock gives back what a slower
// node may still grant. See docs/internals.md, "Redlock (`redlock.go`,
// `redlock_wait.go`)".
func (a *acquisition) runRedlock(ctx context.Context) (*Lease, error) {
	l := a.l
	if a.waits && !l.mut.noTurns {
		turn, leave := l.turns.wait(a.key)
		defer leave()
		if err := a.waitTurn(ctx, turn); err != nil {
			return nil, err
		}
	}
	s, err := a.attemptRedlock(ctx)
	if s != nil || err != nil {
		return s, err
	}
	if !a.waits {
		if !l.mut.keepStraggler {
			a.undo()
		}
		return nil, a.busy()
	}
	w, err := a.joinRoom(ctx)
	if err != nil {
		return nil, err
	}
	defer l.leave(w)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		ev, _, err := a.next(ctx, w, timer)
		switch ev {
		case waitEnded:
			return nil, err
		case waitWoken:
			a.nextTry = time.Now().Add(jitter())
		case waitDue:
			if s, err := a.attemptRedlock(ctx); s != nil || err != nil {
				return s, err
			}
		}
	}
}

// waitTurn waits for turn to close; else it returns the call's error when
// the budget or ctx ends or the Locker closes (nothing was sent to undo).
func (a *acquisition) waitTurn(ctx context.Context, turn <-chan struct{}) error {
	select {
	case <-turn:
		return nil
	default:
	}
	a.waiting(ctx)
	timer := time.NewTimer(time.Until(a.deadline))
	defer timer.Stop()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		return a.ended(ctx)
	case <-a.l.done:
		return ErrClosed
	case <-timer.C:
		return a.expired()
	}
}

// attemptRedlock is attempt on Redlock's nodes. An owner split between
// nodes (granted by too few, busy on too few) gives its grants back and
// retries soon under a new owner; one busy on a majority with a stray grant
// gives it back and waits under a new owner (the old one's done markers void
// its late attempts). A waiting call whose attempt failed (too few nodes
// answered) retries the same way after a backoff.
func (a *acquisition) attemptRedlock(ctx context.Context) (*Lease, error) {
	t := a.try(ctx)
	if t.err == nil && t.r.unseen != nil {
		// Earlier attempts whose every node answered stay so: dropped.
		a.unseen = append(slices.DeleteFunc(a.unseen, func(p *pending) bool { return p.unseen() == noMarkers }), t.r.unseen)
	}
	err := t.err
	if err == nil && t.r.found == foundEnded {
		err = errEnded
	}
	switch {
	case err != nil && a.waits && err != ErrClosed && err != errNoAnswer && !isPermits(err) && ctx.Err() == nil:
		if err != errEnded && !neverRan(err) {
			a.uncertain = true // it may have run, or may still run
		}
		a.retryFresh(err, unavailable("acquire", withCause(err)))
		return nil, nil
	case err != nil:
		return nil, a.failed(ctx, err)
	case t.r.found == foundSplit:
		a.undoOwner(t.owner)
		a.freshOwner()
	case t.r.stray:
		a.undoOwner(t.owner)
		a.newOwner()
	case t.r.proposed:
		t.wall = time.Time{} // the fence may be the Locker's own proposal: no server clock to sample
	}
	return a.settle(ctx, t)
}

// retryFresh retries a Redlock attempt that too few nodes answered: grants
// given back, a new owner, backoff (at most failoverRetry) plus jitter.
func (a *acquisition) retryFresh(cause, err error) {
	a.undo()
	a.freshOwner()
	if a.l.mut.noRedlockBackoff {
		a.unavail = err
		return
	}
	a.retryAfter(cause, err)
	if a.retryIn > failoverRetry {
		a.retryIn = failoverRetry
		a.nextTry = time.Now().Add(a.retryIn)
	}
	a.nextTry = a.nextTry.Add(jitter())
}

// freshOwner readies a Redlock retry: a new owner (the old one's done markers
// void its attempts) after jitter, so split owners do not split again.
func (a *acquisition) freshOwner() {
	a.newOwner()
	a.nextTry = time.Now().Add(jitter())
}

// jitter is a random wait in [1ms, 11ms) that spreads Redlock retries.
func jitter() time.Duration {
	return time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
}

// turns lets one Redlock waiter of a lock at a time try, in arrival order
// (they do not queue in Redis).
type turns struct {
	mu    sync.Mutex
	lines map[string][]chan struct{} // by lock: the waiters in order; the first's channel is closed
}

// wait joins key's line. It returns a channel closed at the caller's turn
// and a leave function (passes the turn on) to call exactly once.
func (t *turns) wait(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t.mu.Lock()
	if t.lines == nil {
		t.lines = map[string][]chan struct{}{}
	}
	line := append(t.lines[key], ch)
	t.lines[key] = line
	if len(line) == 1 {
		close(ch)
	}
	t.mu.Unlock()
	return ch, func() { t.leave(key, ch) }
}

func (t *turns) leave(key string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.lines[key]
	if i := slices.Index(line, ch); i >= 0 {
		line = slices.Delete(line, i, i+1)
		if i == 0 && len(line) > 0 {
			close(line[0]) // the next one's turn
		}
	}
	if len(line) == 0 {
		delete(t.lines, key)
	} else {
		t.lines[key] = line
	}
}
