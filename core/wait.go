package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitRoom holds the local FIFO queue of every lock this Locker's callers
// are waiting for, and the Locker's one Pub/Sub connection, subscribed to
// the release channel of exactly those locks (subscribe with the first
// waiter, unsubscribe after the last). Only the head of a queue contends in
// Redis; a release message, or the head leaving without the lock, wakes the
// next one.
type waitRoom struct {
	client redis.UniversalClient

	mu      sync.Mutex
	queues  map[string]*keyQueue // by channel name
	ops     []psOp               // subscribe/unsubscribe to send, in order
	started bool
	closed  bool

	kick chan struct{}
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

type keyQueue struct {
	waiters []*waiter // FIFO; waiters[0] is the head
	// the holder's remaining TTL as last seen by a head, and when: the
	// waiters behind the head report it too
	holderTTL time.Duration
	holderAt  time.Time
}

type waiter struct {
	ch       string
	wake     chan struct{} // capacity 1: "attempt now"
	promoted chan struct{} // capacity 1: "you are the head now: re-arm your timer"
}

type psOp struct {
	sub bool
	ch  string
}

func newWaitRoom(c redis.UniversalClient) *waitRoom {
	r := &waitRoom{client: c, queues: map[string]*keyQueue{}, kick: make(chan struct{}, 1)}
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r
}

// idle reports whether nobody of this Locker waits for the channel's lock.
func (r *waitRoom) idle(ch string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queues[ch] == nil
}

// join appends a waiter to the channel's queue. The first waiter creates the
// queue and subscribes; it is woken when the subscription is confirmed, so
// its next attempt cannot miss a release. It returns nil after close.
func (r *waitRoom) join(ch string) *waiter {
	w := &waiter{ch: ch, wake: make(chan struct{}, 1), promoted: make(chan struct{}, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	q := r.queues[ch]
	if q == nil {
		q = &keyQueue{}
		r.queues[ch] = q
		r.ops = append(r.ops, psOp{sub: true, ch: ch})
		if !r.started {
			r.started = true
			r.wg.Add(1)
			go r.run()
		}
		signal(r.kick)
	}
	q.waiters = append(q.waiters, w)
	return w
}

// setHolder records the holder's remaining TTL seen by w's attempt at at.
func (r *waitRoom) setHolder(w *waiter, ttl time.Duration, at time.Time) {
	r.mu.Lock()
	if q := r.queues[w.ch]; q != nil && at.After(q.holderAt) {
		q.holderTTL, q.holderAt = ttl, at
	}
	r.mu.Unlock()
}

// holder returns the holder's remaining TTL last seen for w's queue, and
// when it was seen (zero: never).
func (r *waitRoom) holder(w *waiter) (time.Duration, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[w.ch]; q != nil {
		return q.holderTTL, q.holderAt
	}
	return 0, time.Time{}
}

// isHead reports whether w is at the head of its queue.
func (r *waitRoom) isHead(w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[w.ch]
	return q != nil && len(q.waiters) > 0 && q.waiters[0] == w
}

// leave removes w. A head that leaves without the lock (timeout,
// cancellation, error) wakes the next waiter to attempt at once, since it
// may have consumed a release message; a head that obtained the lock only
// promotes the next one (it re-arms its fallback timer), as that one can
// only succeed after this lock's release, which will wake it.
func (r *waitRoom) leave(w *waiter, obtained bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[w.ch]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if len(q.waiters) == 0 {
			delete(r.queues, w.ch)
			r.ops = append(r.ops, psOp{sub: false, ch: w.ch})
			signal(r.kick)
		} else if i == 0 && !obtained {
			signal(q.waiters[0].wake)
		} else if i == 0 {
			signal(q.waiters[0].promoted)
		}
		return
	}
}

// wakeHead wakes the head waiter of a channel, if any.
func (r *waitRoom) wakeHead(ch string) {
	r.mu.Lock()
	if q := r.queues[ch]; q != nil && len(q.waiters) > 0 {
		signal(q.waiters[0].wake)
	}
	r.mu.Unlock()
}

func (r *waitRoom) run() {
	defer r.wg.Done()
	ps := r.client.Subscribe(r.ctx)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
			r.mu.Lock()
			ops := r.ops
			r.ops = nil
			r.mu.Unlock()
			r.send(ps, ops)
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				r.wakeHead(m.Channel)
			case *redis.Subscription:
				// Every confirmation, including the resubscription after a
				// reconnect, wakes the head: a release may have been missed
				// while not subscribed.
				if m.Kind == "subscribe" {
					r.wakeHead(m.Channel)
				}
			}
		}
	}
}

// send issues the queued operations in order, merging runs of one kind.
// A failure (Redis down) is left to go-redis, which resubscribes every
// channel it was asked for when it reconnects; waiters fall back to their
// timers meanwhile.
func (r *waitRoom) send(ps *redis.PubSub, ops []psOp) {
	for len(ops) > 0 {
		n := 1
		for n < len(ops) && ops[n].sub == ops[0].sub {
			n++
		}
		chs := make([]string, n)
		for i := range chs {
			chs[i] = ops[i].ch
		}
		if ops[0].sub {
			_ = ps.Subscribe(r.ctx, chs...)
		} else {
			_ = ps.Unsubscribe(r.ctx, chs...)
		}
		ops = ops[n:]
	}
}

func (r *waitRoom) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
}
