package core

import (
	"context"
	"time"
)

// refresh is how often a waiter refreshes its queue entry (and retries, in
// case a notification was lost): a third of its TTL. Its entry lives one and
// a half of those (and at least 100ms more than one), so that a waiter that
// is gone is skipped, not granted, at most that long after its last
// refresh, and a live one keeps its place through a refresh that is late by
// up to that margin.
func refresh(ttl time.Duration) time.Duration { return ttl / 3 }

func entryTTL(ttl time.Duration) time.Duration {
	return max(refresh(ttl)*3/2, refresh(ttl)+entryMargin)
}

// entryMargin is the least time a queue entry outlives its next refresh.
const entryMargin = 100 * time.Millisecond

// run is one Lock or TryLock that goes to Redis: an attempt, and for a
// Lock that found the lock busy, the wait in its queue until the lock is
// handed to it, the budget ends, ctx ends or the Locker closes.
//
// The wait keeps one owner id from its first attempt to its end: nothing
// of it is undone while it goes on (a grant too late to use is claimed by
// an attempt, not given back), so no late copy of an attempt and no undo
// can act on a hold that a later attempt of the same call made.
func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	l := a.l
	if l.opts.tag != nil && a.tag == nil {
		// Only calls that go to Redis store a tag: a re-entry never asks.
		a.tag = holderTag(l.opts.tag(ctx))
	}
	if err := l.checkServer(ctx, a.deadline); err != nil {
		return nil, err
	}
	if !l.be.queues() && a.waits && !l.mut.noTurns {
		// One waiter of this lock at a time tries, a fresh call too: it
		// waits its turn behind the Locker's earlier waiters (see turns).
		turn, leave := l.turns.wait(a.key)
		defer leave()
		if err := a.waitTurn(ctx, turn); err != nil {
			return nil, err
		}
	}
	s, err := a.attempt(ctx)
	if s != nil || err != nil || !a.waits {
		if s == nil && err == nil {
			err = a.busy()
			if !l.be.queues() && !l.mut.keepStraggler {
				// Redlock: a node that answers after the majority said
				// busy may still grant this owner; give it back, as a
				// waiter's budget end does.
				a.undo()
			}
		}
		return s, err
	}
	// Queued in Redis: wait to be handed the lock by whoever frees it (told
	// on the lock's channel), refreshing the entry every refresh interval —
	// which also retries, should a notification be lost.
	w := l.join(a.keys.hash(), a.owner.id, a.sentAt[0])
	if w == nil {
		a.undo()
		return nil, ErrClosed
	}
	defer l.leave(w)
	a.waiting(ctx)
	return a.wait(ctx, w)
}

// wait is the queued part of run: until the lock is handed to the waiter
// w, the budget ends, ctx ends or the Locker closes.
func (a *acquisition) wait(ctx context.Context, w *waiter) (*Lease, error) {
	l := a.l
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		remaining := time.Until(a.deadline)
		if remaining <= 0 {
			a.undo() // leave the queue (and pass the lock on, if it came meanwhile)
			a.sawHandover(w)
			return nil, a.expired()
		}
		timer.Reset(a.planWake(w, remaining))
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
		case <-w.nudge: // a handover that ends before this wake: see planWake
			continue
		case <-w.wake:
			if !l.be.queues() {
				// Every waiter of every Locker hears a Redlock release:
				// spread their attempts, or they split the nodes.
				a.nextTry = time.Now().Add(jitter())
				continue
			}
		case <-timer.C:
			if !time.Now().Before(a.deadline) {
				continue // the budget's end: no attempt, it would have none left
			}
			if a.sawHandover(w) && a.sleep(time.Until(a.deadline)) > 0 {
				continue // the lock was handed on since: nothing is due yet
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

// planWake is how long the queued waiter w sleeps, with what the rooms
// left for it read (sawHandover), and tells the rooms when it wakes
// (w.until): a grant to another waiter whose first expiry comes before then
// nudges it (if that waiter is gone, the lock is free then). A grant left
// while until still said the last wake nudged no one: it reads again.
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

// sleep is how long a queued waiter sleeps before its next attempt unless
// something wakes it, at most remaining (the budget's end).
func (a *acquisition) sleep(remaining time.Duration) time.Duration {
	l := a.l
	every := refresh(a.o.ttl)
	// The next refresh is due every after the last one was sent, however
	// often the lock passes from waiter to waiter ahead of this one: a
	// waiter that refreshed only after a quiet spell would lose its place.
	sleep := min(remaining, time.Duration(a.sentAt[len(a.sentAt)-1]+int64(every)-l.clock()))
	if l.mut.restartRefresh {
		// the defect: the refresh counted from the latest news of the
		// holder, a handover to another waiter included
		sleep = max(sleep, min(remaining, time.Until(a.holder.at.Add(every))))
	}
	if a.holder.seen() && (a.unavail == nil || l.mut.retryAtExpiry) {
		// (While attempts fail, their backoff, nextTry, says when.)
		sleep = min(sleep, a.holder.left()+time.Millisecond)
	}
	if !a.nextTry.IsZero() {
		// The last attempt failed, or split a Redlock's nodes, or a
		// Redlock release was heard.
		sleep = min(sleep, max(time.Until(a.nextTry), 0))
	}
	return sleep
}

// sawHandover reads the handovers to other waiters that the rooms learnt
// since w last looked, the latest of each room (see handOver): another
// waiter has the lock, and if it is gone the lock is free when its first
// expiry passes. A semaphore's other permits
// may free sooner, and a hold a check found may be older news than the
// call's own (on Redlock, one node's): for those the earliest known expiry
// stands. It reports whether what the call knows of the holder changed.
// The rooms wake a waiter for a handover only when that expiry comes
// before its next wake; it reads the rest when it wakes, here.
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

// granted builds the lease a release handed to this waiter: its hold
// lives, until it is renewed (at a third of that life), as long as the
// queue entry of refresh g.seq would have, so it is valid from that
// refresh's send time. A grant that arrives too late to be of use (a slow
// reply path) is claimed by an attempt, whose reply carries a validity of
// its own; one that arrives after ctx ended is passed on (the context's
// error).
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
	if a.l.clock() >= validUntil {
		if a.l.mut.lateGrant {
			// the fixed defect: the same owner then waits on, its done
			// marker written (waited for, so that every round shows it)
			undone := make(chan struct{})
			a.l.undoThen(&a.keys, a.owner, &a.o, undone)
			<-undone
			return nil, nil
		}
		return a.attempt(ctx)
	}
	if a.l.be.replicaAck() {
		// Replicas must acknowledge the hold before it is used: claim it
		// now (the acquire script renews its own owner's hold) and WAIT.
		return a.attempt(ctx)
	}
	// It claims its TTL at a third of this first life, as a fresh hold
	// renews at a third of its TTL: a hold released sooner never does.
	now := a.l.clock()
	return a.newHold(ctx, g.fence, validUntil, now+(validUntil-now)/3, true)
}

// waitTurn waits until turn is closed, or the budget or ctx ends, or the
// Locker closes (then the call's error: busy, as the earlier waiters found
// the lock; nothing was sent, so nothing is undone).
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

// waiting tells the Observer, once per call, that the call waits (in the
// lock's queue, or for its turn).
func (a *acquisition) waiting(ctx context.Context) {
	if !a.waited {
		a.waited = true
		a.l.observe(ctx, Event{Kind: EventWaiting, Key: a.key, Pattern: a.o.pattern, Permits: a.keys.permits, Read: a.keys.read, Attempts: a.attempts, HolderTag: a.holderTag})
	}
}
