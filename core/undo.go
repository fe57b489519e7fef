package core

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// undoWaits lets the undos waiting for Redis to come back retry as soon as
// any call of the Locker gets an answer again, instead of at their next
// backoff step.
type undoWaits struct {
	pending atomic.Int32
	mu      sync.Mutex
	wake    chan struct{} // closed (and replaced) when Redis answers again
}

// wait returns the channel closed at the next answer.
func (u *undoWaits) wait() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.wake
}

// answered is called after a call to Redis got an answer; it wakes the
// waiting undos, if any (one atomic load otherwise).
func (u *undoWaits) answered() {
	if u.pending.Load() == 0 {
		return
	}
	u.mu.Lock()
	close(u.wake)
	u.wake = make(chan struct{})
	u.mu.Unlock()
}

// answered is called after a call to Redis got an answer: the deployment
// has been reached (see failingOver), and the undos waiting for Redis go
// now.
func (l *Locker) answered() {
	if !l.reached.Load() {
		l.reached.Store(true)
	}
	l.undoWake.answered()
}

// undo releases owner's possible hold on k after an attempt whose outcome
// the caller did not learn, leaving owner's done marker so that a late copy
// of the attempt cannot take the lock. It sends the release again until one
// is answered, the TTL and the marker's lifetime have passed, or the Locker
// closes; in the background, or once inline when the Locker is closing.
// See docs/internals.md, "Scripts are sent at most once".
func (l *Locker) undo(k *lockKeys, owner ownerID, o *callOptions) { l.undoThen(k, owner, o, nil) }

// undoThen is undo, closing done (if not nil) when it ends.
func (l *Locker) undoThen(k *lockKeys, owner ownerID, o *callOptions, done chan<- struct{}) {
	run := func() {
		if done != nil {
			defer close(done)
		}
		l.undoWake.pending.Add(1)
		defer l.undoWake.pending.Add(-1)
		giveUp := time.Now().Add(o.ttl + l.markerTTL)
		backoff := 50 * time.Millisecond
		for {
			back := l.undoWake.wait()
			ctx, cancel := context.WithTimeout(context.Background(), o.releaseTimeout)
			_, err := l.be.release(ctx, k, owner, true)
			cancel()
			if err == nil {
				l.answered()
				return
			}
			if !time.Now().Before(giveUp) || l.closed.Load() || refusedByServer(err) {
				l.logger().Warn("lockgate: undoing an abandoned acquisition failed; the lock, if it was taken, expires after its TTL",
					slog.Any("error", err))
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-l.done:
			case <-back:
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, time.Second)
		}
	}
	if !l.goBackground(run) {
		run()
	}
}
