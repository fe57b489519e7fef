package core

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"time"
)

// renewChunk bounds the renewals sent in one pipeline.
const renewChunk = 1000

// watchdog keeps every lease of one Locker: it renews the ones with a
// watchdog every TTL/3 and declares a lease lost when its validity ends
// without a successful renewal. Three goroutines serve all leases, however
// many: the scheduler (one timer, a heap ordered by the next event) and two
// senders (one round trip per batch of due renewals). The scheduler never waits
// on Redis, so a hung server cannot delay a loss past the validity.
type watchdog struct {
	l       *Locker
	mu      sync.Mutex
	h       leaseHeap
	queue   []*Lease // due renewals for the sender
	armed   int64    // when the scheduler's timer fires (monotonic ns)
	started bool

	kick chan struct{} // wakes the scheduler
	send chan struct{} // wakes the sender
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newWatchdog(l *Locker) *watchdog {
	w := &watchdog{l: l, kick: make(chan struct{}, 1), send: make(chan struct{}, 1), armed: math.MaxInt64}
	w.ctx, w.stop = context.WithCancel(context.Background())
	return w
}

// start launches the goroutines with the first lease (w.mu held), so that a
// Locker that never locks — or an fx graph that fails to build after
// creating one — owns no goroutine.
func (w *watchdog) start() {
	if w.started || w.ctx.Err() != nil {
		return
	}
	w.started = true
	w.wg.Add(3)
	go w.schedule()
	go w.sender()
	go w.sender()
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// next is the lease's next event on the monotonic clock.
func next(s *Lease) int64 {
	v := s.validUntil.Load()
	if s.watchdog && !s.pending && s.renewAt < v {
		return s.renewAt
	}
	return v
}

func (w *watchdog) add(s *Lease) {
	w.mu.Lock()
	w.start()
	s.hkey = next(s)
	heap.Push(&w.h, s)
	// Wake the scheduler only if this lease's first event comes before the
	// timer it has set: on the hot path (TTL 30s) nothing is woken.
	early := s.hkey < w.armed
	w.mu.Unlock()
	if early {
		signal(w.kick)
	}
}

func (w *watchdog) remove(s *Lease) {
	w.mu.Lock()
	if s.hidx >= 0 {
		heap.Remove(&w.h, s.hidx)
	}
	w.mu.Unlock()
}

// renewed records a successful renewal sent at sent (monotonic ns).
func (w *watchdog) renewed(s *Lease, sent int64, ttl time.Duration) {
	w.mu.Lock()
	w.setRenewed(s, sent, ttl)
	w.mu.Unlock()
	signal(w.kick)
}

func (w *watchdog) setRenewed(s *Lease, sent int64, ttl time.Duration) {
	s.validUntil.Store(sent + int64(ttl-w.l.drift(ttl)))
	s.renewAt = sent + int64(ttl/3)
	w.fix(s)
}

// fix restores the heap order after s's state changed (w.mu held).
func (w *watchdog) fix(s *Lease) {
	if s.hidx >= 0 {
		s.hkey = next(s)
		heap.Fix(&w.h, s.hidx)
	}
}

// lose ends a lease that is no longer held: its context is cancelled with
// ErrLockLost. It does nothing to a lease already ended.
func (w *watchdog) lose(s *Lease, why error) {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	w.remove(s)
	s.cancel(ErrLockLost)
	w.l.observe(context.Background(), Event{Kind: EventLost, Key: s.key, Held: time.Since(s.acquired), Fence: s.fence, Err: why})
}

func (w *watchdog) schedule() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lost []*Lease
	for {
		w.mu.Lock()
		now := w.l.mono()
		dispatched := false
		for len(w.h) > 0 {
			s := w.h[0]
			if s.validUntil.Load() <= now {
				heap.Pop(&w.h)
				lost = append(lost, s)
				continue
			}
			ttl := time.Duration(s.ttl.Load())
			if s.watchdog && !s.pending && s.renewAt-int64(min(ttl/10, 10*time.Millisecond)) <= now {
				s.pending = true
				w.queue = append(w.queue, s)
				w.fix(s)
				dispatched = true
				continue
			}
			break
		}
		wait := time.Hour
		if len(w.h) > 0 {
			wait = time.Duration(w.h[0].hkey - now)
		}
		w.armed = now + int64(wait)
		w.mu.Unlock()

		for _, s := range lost {
			w.lose(s, ErrLockLost)
		}
		clear(lost)
		lost = lost[:0]
		if dispatched {
			signal(w.send)
		}
		timer.Reset(wait)
		select {
		case <-w.ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
	}
}

// sender sends due renewals, at most renewChunk per round trip. Two run, so
// that one batch's bookkeeping overlaps the next one's round trip.
func (w *watchdog) sender() {
	defer w.wg.Done()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.send:
		}
		for w.ctx.Err() == nil {
			w.mu.Lock()
			n := min(len(w.queue), renewChunk)
			batch := w.queue[:n:n]
			w.queue = w.queue[n:]
			if len(w.queue) == 0 {
				w.queue = nil
			} else {
				signal(w.send) // let the other sender take the rest
			}
			w.mu.Unlock()
			if n == 0 {
				break
			}
			w.renewBatch(batch)
		}
	}
}

func (w *watchdog) renewBatch(batch []*Lease) {
	rs := make([]renewal, len(batch))
	var longest time.Duration
	var ttlArg any
	var ttlOf time.Duration
	for i, s := range batch {
		ttl := time.Duration(s.ttl.Load())
		longest = max(longest, ttl)
		if ttlArg == nil || ttl != ttlOf { // one boxed argument per distinct TTL
			ttlArg, ttlOf = ms(ttl), ttl
		}
		rs[i] = renewal{keys: s.keys, ownerArg: s.ownerArg, ttl: ttl, ttlArg: ttlArg}
	}
	ctx, cancel := context.WithTimeout(w.ctx, longest)
	sent := w.l.mono()
	w.l.be.renew(ctx, rs)
	cancel()

	var lost []*Lease
	w.mu.Lock()
	now := w.l.mono()
	for i, s := range batch {
		s.pending = false
		if s.done.Load() || s.hidx < 0 {
			continue // released or lost meanwhile
		}
		switch {
		case rs[i].err != nil:
			// transient: retry soon; the scheduler declares the loss if
			// the validity runs out first.
			s.renewAt = now + int64(min(max(rs[i].ttl/10, 10*time.Millisecond), time.Second))
			w.fix(s)
		case !rs[i].held:
			lost = append(lost, s)
		default:
			w.setRenewed(s, sent, rs[i].ttl)
		}
	}
	w.mu.Unlock()
	if w.l.opts.observer != nil {
		for i, s := range batch {
			if rs[i].err != nil || rs[i].held {
				w.l.observe(context.Background(), Event{Kind: EventRenewed, Key: s.key, Fence: s.fence, Err: rs[i].err})
			}
		}
	}
	for _, s := range lost {
		w.lose(s, ErrNotHeld)
	}
	signal(w.kick)
}

// close stops both goroutines and ends every lease still held with
// ErrClosed. It does not release the locks in Redis: they expire.
func (w *watchdog) close() {
	w.mu.Lock()
	w.stop() // under w.mu: no start after this
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	held := append([]*Lease(nil), w.h...)
	for _, s := range held {
		s.hidx = -1
	}
	w.h = nil
	w.mu.Unlock()
	for _, s := range held {
		if s.done.CompareAndSwap(false, true) {
			s.cancel(ErrClosed)
		}
	}
}

type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].hkey < h[j].hkey }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *leaseHeap) Push(x any) {
	s := x.(*Lease)
	s.hidx = len(*h)
	*h = append(*h, s)
}
func (h *leaseHeap) Pop() any {
	old := *h
	n := len(old)
	s := old[n-1]
	old[n-1] = nil
	s.hidx = -1
	*h = old[:n-1]
	return s
}
