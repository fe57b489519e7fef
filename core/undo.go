package core

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// undoWaits wakes the undos waiting for Redis as soon as any call of the
// Locker is answered again, instead of at their next backoff step.
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

// answered wakes the waiting undos, if any (one atomic load otherwise).
func (u *undoWaits) answered() {
	if u.pending.Load() == 0 {
		return
	}
	u.mu.Lock()
	close(u.wake)
	u.wake = make(chan struct{})
	u.mu.Unlock()
}

// answered is called when Redis answered: it marks the deployment reached
// (see failingOver) and wakes the waiting undos.
func (l *Locker) answered() {
	if !l.reached.Load() {
		l.reached.Store(true)
	}
	l.undoWake.answered()
}

// undo releases owner's possible hold on k, leaving the done marker, retrying
// until answered, past the TTL and marker life, or closed; then closes done
// (if not nil). See docs/internals.md, "Scripts are sent at most once".
func (l *Locker) undo(k *lockKeys, owner ownerID, o *callOptions, done chan<- struct{}) {
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
			_, err := l.be.release(ctx, k, owner, allMarkers)
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
