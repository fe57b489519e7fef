package core

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"
)

// refresh is how often a waiter refreshes its queue entry, which is also its
// retry should a message be lost: TTL/3. See docs/design.md, "Waiting and handoff".
func refresh(ttl time.Duration) time.Duration { return ttl / 3 }

// entryTTL is a queue entry's life: 1.5 refresh intervals, at least
// entryMargin past the next refresh, so a slightly late refresh keeps its place.
func entryTTL(ttl time.Duration) time.Duration {
	return max(refresh(ttl)*3/2, refresh(ttl)+entryMargin)
}

// entryMargin is the least time a queue entry outlives its next refresh.
const entryMargin = 100 * time.Millisecond

// run is one Lock or TryLock that goes to Redis: an attempt, then for a busy
// Lock the wait in the queue (wait). A wait keeps one owner id and undoes
// nothing while it goes on. Redlock's acquisitions, which do not queue, run
// runRedlock instead. See docs/design.md, "Waiting and handoff".
func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	l := a.l
	if l.opts.tag != nil {
		// Only calls that go to Redis ask for a tag, never a re-entry; "" (none)
		// if too long or holding '|'.
		a.tag = ""
		if t := l.opts.tag(ctx); len(t) <= MaxHolderTagLen && strings.IndexByte(t, '|') < 0 {
			a.tag = t
		}
	}
	if err := l.checkServer(ctx, a.deadline, a.keys.hash()); err != nil {
		return nil, err
	}
	if !l.be.traits().queues {
		return a.runRedlock(ctx)
	}
	s, err := a.attempt(ctx)
	if s != nil || err != nil || !a.waits {
		if s == nil && err == nil {
			err = a.busy()
		}
		return s, err
	}
	// Queued in Redis: wait for a grant, refreshing the entry meanwhile.
	w, err := a.joinRoom(ctx)
	if err != nil {
		return nil, err
	}
	defer l.leave(w)
	return a.wait(ctx, w)
}

// joinRoom adds the call, queued by its first attempt, to the Locker's wait
// room, which passes it the lock channel's messages; ErrClosed, the wait
// undone, once the Locker closes.
func (a *acquisition) joinRoom(ctx context.Context) (*waiter, error) {
	w := a.l.join(a.keys.hash(), a.owner.id, a.sentAt[0])
	if w == nil {
		a.undo()
		return nil, ErrClosed
	}
	a.waiting(ctx)
	return w, nil
}

// wait is the queued part of run: until w is granted the lock, the budget or
// ctx ends, or the Locker closes.
func (a *acquisition) wait(ctx context.Context, w *waiter) (*Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		ev, g, err := a.next(ctx, w, timer)
		var s *Lease
		switch ev {
		case waitEnded:
			return nil, err
		case waitReplan:
			continue
		case waitGranted:
			s, err = a.granted(ctx, g)
		default: // woken or due: look in Redis
			if s, err = a.attempt(ctx); s == nil && err == nil {
				select {
				case g := <-w.granted: // handed over while the attempt ran
					s, err = a.granted(ctx, g)
				default:
				}
			}
		}
		if s != nil || err != nil {
			return s, err
		}
	}
}

// waitEvent is what ends one sleep of a waiting call (next): see
// docs/internals.md, "Waiting (`wait.go`, `acquire.go`)".
type waitEvent uint8

const (
	waitDue     waitEvent = iota // an attempt is due: a refresh, the holder's expiry as known, a retry
	waitWoken                    // a message says the lock may be free, or a grant may have been missed
	waitGranted                  // a release handed it the lock (next's grant)
	waitReplan                   // a handover changed what it knows, or the budget ended: no attempt
	waitEnded                    // the budget or ctx ended, or the Locker closed: undone, next's error ends the call
)

// next sleeps until w's next event (timer: the caller's, reused).
func (a *acquisition) next(ctx context.Context, w *waiter, timer *time.Timer) (waitEvent, grant, error) {
	remaining := time.Until(a.deadline)
	if remaining <= 0 {
		a.undo() // leave the queue (and pass the lock on, if it came meanwhile)
		a.sawHandover(w)
		return waitEnded, grant{}, a.expired()
	}
	timer.Reset(a.planWake(w, remaining))
	select {
	case <-ctx.Done():
		a.undo()
		return waitEnded, grant{}, a.ended(ctx)
	case <-a.l.done:
		a.undo()
		return waitEnded, grant{}, ErrClosed
	case g := <-w.granted:
		return waitGranted, g, nil
	case <-w.nudge: // a handover that ends before this wake: see planWake
		return waitReplan, grant{}, nil
	case <-w.wake:
		return waitWoken, grant{}, nil
	case <-timer.C:
		if !time.Now().Before(a.deadline) {
			return waitReplan, grant{}, nil // the budget's end: no attempt, it would have none left
		}
		if a.sawHandover(w) && a.sleep(time.Until(a.deadline)) > 0 {
			return waitReplan, grant{}, nil // the lock was handed on since: nothing is due yet
		}
		return waitDue, grant{}, nil
	}
}

// holderSeen is what a waiting call knows of the holder: its ttl when
// learnt (at). The zero value: nothing known yet.
type holderSeen struct {
	ttl time.Duration
	at  time.Time
}

func (h holderSeen) seen() bool { return !h.at.IsZero() }

// ends is when the holder's TTL runs out unless renewed.
func (h holderSeen) ends() time.Time { return h.at.Add(h.ttl) }

// left is how much of the holder's TTL is left now (0 once it ran out).
func (h holderSeen) left() time.Duration { return max(time.Until(h.ends()), 0) }

// busy is the *BusyError of a call that last saw the lock busy; once the
// holder's TTL as seen ran out, the hint is at most that whole TTL.
func (a *acquisition) busy() error {
	left := a.holder.left()
	hint := a.l.holdTimes.hint(left)
	if left == 0 && a.holder.ttl > 0 {
		hint = min(hint, a.holder.ttl)
	}
	return &BusyError{Key: a.key, RetryAfter: hint, HolderTTL: left, Permits: a.keys.permits}
}

// expired is the error of a call whose deadline passed between attempts:
// busy (or unavailable), joined with context.DeadlineExceeded if it was ctx's.
func (a *acquisition) expired() error {
	last := cmp.Or(a.unavail, a.busy()) // unavail: a Redlock's last attempt had too few nodes
	if a.ctxEnds {
		return errors.Join(last, context.DeadlineExceeded)
	}
	return last
}

// ended is the error of a call whose ctx ended between attempts: the
// context's error, joined with busy or unavailable if seen.
func (a *acquisition) ended(ctx context.Context) error {
	if a.unavail != nil {
		return errors.Join(a.unavail, ctxErr(ctx))
	}
	if a.holder.seen() {
		return errors.Join(a.busy(), ctxErr(ctx))
	}
	return ctxErr(ctx)
}

// retryAfter schedules a waiting call's retry after cause: a backoff doubling
// from retryMin to the refresh interval (at most failoverRetry during a
// failover). err is the call's error if the budget ends first.
func (a *acquisition) retryAfter(cause, err error) {
	a.unavail = err
	a.retryIn = min(max(2*a.retryIn, retryMin), refresh(a.o.ttl))
	if a.l.failingOver(cause) {
		a.retryIn = min(a.retryIn, failoverRetry)
	}
	a.nextTry = time.Now().Add(a.retryIn)
}

// retryMin is a waiting call's first retry delay; failoverRetry caps it during
// a failover, so retries do not step past the promotion. See
// docs/topologies.md, "A refused dial during a failover".
const (
	retryMin      = 25 * time.Millisecond
	failoverRetry = 250 * time.Millisecond
)

// planWake returns how long w sleeps and publishes its wake time (w.until),
// so that rooms nudge it for an earlier-ending handover. It reads handovers
// again after the store. See docs/internals.md, "Waiting (`wait.go`, `acquire.go`)".
func (a *acquisition) planWake(w *waiter, remaining time.Duration) time.Duration {
	a.sawHandover(w)
	sleep := a.sleep(remaining)
	w.until.Store(a.l.clock() + int64(sleep))
	if a.sawHandover(w) {
		sleep = a.sleep(remaining)
		w.until.Store(a.l.clock() + int64(sleep))
	}
	return sleep
}

// sleep is how long a queued waiter sleeps before its next attempt, at most remaining.
func (a *acquisition) sleep(remaining time.Duration) time.Duration {
	l := a.l
	every := refresh(a.o.ttl)
	// Counted from the last refresh sent, or quick handovers starve refreshes.
	sleep := min(remaining, time.Duration(a.sentAt[len(a.sentAt)-1]+int64(every)-l.clock()))
	if l.mut.restartRefresh {
		// mutant restart-refresh: counted from the latest handover
		sleep = max(sleep, min(remaining, time.Until(a.holder.at.Add(every))))
	}
	if a.holder.seen() && (a.unavail == nil || l.mut.retryAtExpiry) {
		// While attempts fail, nextTry decides (mutant retry-at-expiry).
		sleep = min(sleep, a.holder.left()+time.Millisecond)
	}
	if !a.nextTry.IsZero() {
		// A failed attempt, a Redlock split or a Redlock release set nextTry.
		sleep = min(sleep, max(time.Until(a.nextTry), 0))
	}
	return sleep
}

// sawHandover takes the rooms' unread handovers as the call's holder and
// reports whether that changed; for a semaphore, or a handover a check found,
// only an earlier expiry counts.
func (a *acquisition) sawHandover(w *waiter) bool {
	changed := false
	w.readHandovers(func(h handover) {
		seen := holderSeen{ttl: h.life, at: a.l.timeAt(h.learnt)}
		if (a.keys.semaphore() || h.found) && a.holder.seen() && !seen.ends().Before(a.holder.ends()) {
			return
		}
		a.holder = seen
		changed = true
	})
	return changed
}

// granted makes the lease of grant g, valid from the send time of refresh
// g.seq for an entry's life. A grant too late to use is claimed by an
// attempt; one after ctx ended is passed on (undo, the context's error).
func (a *acquisition) granted(ctx context.Context, g grant) (*Lease, error) {
	if g.seq < 1 || g.seq > len(a.sentAt) {
		return nil, nil // not a refresh of this owner id
	}
	ttl := entryTTL(a.o.ttl)
	validUntil := a.sentAt[g.seq-1] + int64(ttl-a.l.drift(ttl))
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx)
	}
	if a.l.clock() >= validUntil {
		if a.l.mut.lateGrant {
			// mutant late-grant: undo (waited for) and wait on under the same owner
			undone := make(chan struct{})
			a.l.undo(&a.keys, a.owner, &a.o, undone)
			<-undone
			return nil, nil
		}
		return a.attempt(ctx)
	}
	if a.l.be.traits().replicaAck {
		// Replicas must acknowledge it first: claim it with an attempt (WAIT).
		return a.attempt(ctx)
	}
	// The first renewal, at a third of this life, claims the full TTL.
	now := a.l.clock()
	return a.newHold(ctx, g.fence, validUntil, now+(validUntil-now)/3, true)
}

// waiting tells the Observer, once per call, that the call waits.
func (a *acquisition) waiting(ctx context.Context) {
	if !a.waited {
		a.waited = true
		a.l.observe(ctx, Event{Kind: EventWaiting, Key: a.key, Pattern: a.o.pattern, Permits: a.keys.permits, Read: a.keys.read, Attempts: a.attempts, HolderTag: a.obs.holderTag})
	}
}
