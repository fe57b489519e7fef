package core

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// renewChunk bounds the renewals sent in one pipeline.
const renewChunk = 1000

// watchdog keeps every hold of one Locker: it renews each watchdog hold every
// TTL/3 and declares a hold lost when its validity ends without a renewal.
// See docs/internals.md, "The watchdog".
type watchdog struct {
	l       *Locker
	mu      sync.Mutex
	h       holdHeap
	queue   []*hold // due renewals for the sender
	armed   int64   // when the scheduler's timer fires (monotonic ns)
	started bool
	closed  bool
	// stopRun ends the goroutines' context when they stop for lack of holds
	stopRun  context.CancelFunc
	lastHeld int64 // when the last hold left (monotonic ns): idle from then
	// recheck: until then (monotonic ns) failed renewals retry every monitorRetry
	recheck int64

	kick   chan struct{} // wakes the scheduler
	passes atomic.Int64  // the scheduler's passes (its wake-ups), for tests
	send   chan struct{} // wakes the sender
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

func newWatchdog(l *Locker) *watchdog {
	w := &watchdog{l: l, kick: make(chan struct{}, 1), send: make(chan struct{}, 1), armed: math.MaxInt64}
	w.ctx, w.stop = context.WithCancel(context.Background())
	return w
}

// start launches the goroutines with the first hold (w.mu held): see
// docs/internals.md, "The watchdog".
func (w *watchdog) start() {
	if w.started || w.closed {
		return
	}
	w.started = true
	var ctx context.Context
	ctx, w.stopRun = context.WithCancel(w.ctx)
	w.lastHeld = w.l.clock()
	w.wg.Go(func() { w.schedule(ctx) })
	w.wg.Go(func() { w.sender(ctx) })
	w.wg.Go(func() { w.sender(ctx) })
	w.startMonitors(ctx)
}

// idleStop is how long (ns) the goroutines outlive the Locker's last hold.
var idleStop atomic.Int64

func init() { idleStop.Store(int64(10 * time.Second)) }

// renews reports whether the watchdog renews h (watchdog on, or handed over).
func (h *hold) renews() bool { return h.watchdog || h.handedOver }

// next is the hold's next event on the monotonic clock.
func next(h *hold) int64 {
	v := h.validUntil.Load()
	if h.renews() && !h.pending && h.renewAt < v {
		return h.renewAt
	}
	return v
}

// add starts watching h; false once closed (the caller then undoes the lock).
func (w *watchdog) add(h *hold) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.start()
	h.heapKey = next(h)
	heap.Push(&w.h, h)
	// Wake the scheduler only if h is due before its timer fires.
	early := h.heapKey < w.armed
	w.mu.Unlock()
	if early {
		signal(w.kick)
	}
	return true
}

// remove stops renewing h; renewing reports whether a renewal of it is in flight.
func (w *watchdog) remove(h *hold) (renewing bool) {
	w.mu.Lock()
	renewing = h.pending
	if h.heapIndex >= 0 {
		heap.Remove(&w.h, h.heapIndex)
	}
	// The last hold: idle time counts from now. Wake the scheduler only if its
	// timer fires after the idle time ends (not on a lock and unlock).
	var late bool
	if len(w.h) == 0 && w.started {
		w.lastHeld = w.l.clock()
		late = w.armed > w.lastHeld+idleStop.Load() || w.l.mut.wakeOnIdle
	}
	w.mu.Unlock()
	if late {
		signal(w.kick)
	}
	return renewing
}

// renewed records a successful renewal sent at sent (monotonic ns); false,
// recording nothing, once h is no longer watched (lost, released, closed).
func (w *watchdog) renewed(h *hold, sent int64, ttl time.Duration) bool {
	w.mu.Lock()
	ok := h.heapIndex >= 0 && h.end.Load() == endLive || w.l.mut.keepLateRenewal
	if ok {
		w.setRenewed(h, sent, ttl)
	}
	w.mu.Unlock()
	signal(w.kick)
	return ok
}

func (w *watchdog) setRenewed(h *hold, sent int64, ttl time.Duration) {
	h.handedOver = false
	h.validUntil.Store(sent + int64(ttl-w.l.drift(ttl)))
	h.renewAt = sent + int64(ttl/3)
	w.fix(h)
}

// fix restores the heap order after h's state changed (w.mu held).
func (w *watchdog) fix(h *hold) {
	if h.heapIndex >= 0 {
		h.heapKey = next(h)
		heap.Fix(&w.h, h.heapIndex)
	}
}

// expire applies the scheduler's rule for a reader of the lease's context:
// h, watched, not being unlocked and past its validity, is lost, its leases
// cancelled, the rest left to the scheduler it wakes. True if h is lost.
func (w *watchdog) expire(h *hold) bool {
	w.mu.Lock()
	lost := h.heapIndex >= 0 && h.count.Load() > 0 && h.validUntil.Load() <= w.l.clock() &&
		h.end.CompareAndSwap(endLive, endLost)
	if lost {
		h.unreported = true
	}
	w.mu.Unlock()
	if lost {
		h.first.cancel(ErrLockLost)
		signal(w.kick)
	}
	return h.end.Load() == endLost
}

// lose ends a live hold found not held, cancelling its leases with ErrLockLost.
func (w *watchdog) lose(h *hold) {
	if h.end.CompareAndSwap(endLive, endLost) {
		w.ended(h, ErrNotHeld)
	}
}

// ended finishes a hold just marked lost: cancels its leases, stops watching
// it and reports why to the Observer and the log.
func (w *watchdog) ended(h *hold, why error) {
	h.first.cancel(ErrLockLost)
	w.remove(h)
	w.l.lost(h, why)
}

// giveBack releases h's lock in Redis in the background (see undo).
func (h *hold) giveBack() { h.l.undo(&h.keys, h.owner, h.undoOptions(), nil) }

// undoOptions: the longest TTL h may have in Redis, and its release timeout.
func (h *hold) undoOptions() *callOptions {
	return &callOptions{ttl: time.Duration(max(h.ttl.Load(), h.unknownTTL.Load())), releaseTimeout: h.release}
}

func (w *watchdog) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due dueHolds
	for {
		w.passes.Add(1)
		w.mu.Lock()
		now := w.l.clock()
		w.collect(now, &due)
		wait := time.Hour
		if len(w.h) > 0 {
			wait = time.Duration(w.h[0].heapKey - now)
		} else if len(w.queue) == 0 && len(due.lost) == 0 {
			after := time.Duration(idleStop.Load())
			if time.Duration(now-w.lastHeld) >= after {
				// Nothing watched (w.mu held): stop the goroutines.
				w.started = false
				w.stopRun()
				w.mu.Unlock()
				return
			}
			wait = after - time.Duration(now-w.lastHeld)
		}
		w.armed = now + int64(wait)
		w.mu.Unlock()

		w.settle(&due)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
	}
}

// dueHolds is what one scheduler pass found, for settle to act on.
type dueHolds struct {
	lost, abandoned []*hold
	dispatched      bool
}

// collect takes the holds due at now off the heap (w.mu held): lost,
// abandoned (no longer renewed) or queued for renewal.
func (w *watchdog) collect(now int64, due *dueHolds) {
	for len(w.h) > 0 {
		h := w.h[0]
		if h.validUntil.Load() <= now {
			heap.Pop(&w.h)
			// Lost from now (under w.mu): a later renewal answer is given back.
			if h.end.CompareAndSwap(endLive, endLost) || h.unreported {
				h.unreported = false
				due.lost = append(due.lost, h)
			}
			continue
		}
		ttl := time.Duration(h.ttl.Load())
		if !h.renews() || h.pending || h.renewAt-int64(min(ttl/10, 10*time.Millisecond)) > now {
			return
		}
		if h.parentEnded() {
			// Abandoned (see parentEnded): no longer renewed, left to expire.
			h.abandoned = true
			h.renewAt = math.MaxInt64
			w.fix(h)
			due.abandoned = append(due.abandoned, h)
			continue
		}
		h.pending = true
		w.queue = append(w.queue, h)
		w.fix(h)
		due.dispatched = true
	}
}

// settle acts on what collect found, outside w.mu.
func (w *watchdog) settle(due *dueHolds) {
	for _, h := range due.abandoned {
		w.l.warnAbandoned(h)
	}
	for _, h := range due.lost {
		why := ErrLockLost
		if h.abandoned {
			why = errAbandoned
		}
		w.ended(h, why)
		if w.l.be.traits().replicaAck || h.unknownTTL.Load() != 0 && !w.l.mut.keepLateRenewal {
			// An unanswered (or unacknowledged) renewal may have extended the
			// lock: give it back. See docs/internals.md, "The watchdog".
			h.giveBack()
		}
	}
	if due.dispatched {
		signal(w.send)
	}
	clear(due.lost)
	clear(due.abandoned)
	*due = dueHolds{lost: due.lost[:0], abandoned: due.abandoned[:0]}
}

// sender sends due renewals, at most renewChunk per round trip (two run).
func (w *watchdog) sender(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.send:
		}
		for ctx.Err() == nil {
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

// renewBatch renews due holds: one round trip on one master; on a Cluster one
// per node, each on its own goroutine. See docs/internals.md, "The watchdog".
func (w *watchdog) renewBatch(batch []*hold) {
	rs := make([]renewal, len(batch))
	var ttlArg any
	var ttlOf time.Duration
	for i, h := range batch {
		ttl := time.Duration(h.ttl.Load())
		if ttlArg == nil || ttl != ttlOf { // one boxed argument per distinct TTL
			ttlArg, ttlOf = ms(ttl), ttl
		}
		rs[i] = renewal{keys: &h.keys, owner: &h.owner, ttl: ttl, ttlArg: ttlArg}
	}
	parts := w.l.be.groups(w.ctx, rs)
	byNode := w.l.be.traits().splitsByNode
	for i, part := range parts {
		if (byNode || i > 0) && w.l.goBackground(func() { w.renewPart(batch, rs, part) }) {
			continue
		}
		w.renewPart(batch, rs, part) // one node, or the Locker is closing
	}
}

// renewPart sends one node's renewals, bounded by their smallest remaining
// validity (past it they are lost anyway), and handles the answers.
func (w *watchdog) renewPart(batch []*hold, rs []renewal, part []int) {
	sent := w.l.clock()
	left := int64(math.MaxInt64)
	for _, i := range part {
		left = min(left, batch[i].validUntil.Load()-sent)
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Duration(max(left, 0)))
	w.l.be.renew(ctx, rs, part)
	cancel()

	for _, i := range part {
		if rs[i].err == nil {
			w.l.answered()
			break
		}
	}
	w.mu.Lock()
	lost, late := w.renewedPart(batch, rs, part, sent)
	w.mu.Unlock()
	if w.l.opts.observer != nil {
		for _, i := range part {
			if rs[i].err != nil || rs[i].held {
				w.l.observe(context.Background(), Event{Kind: EventRenewed, Key: batch[i].key, Pattern: batch[i].pattern, Permits: batch[i].keys.permits, Read: batch[i].keys.read, Fence: batch[i].fence, Err: rs[i].err})
			}
		}
	}
	for _, h := range lost {
		w.lose(h)
	}
	for _, h := range late {
		h.giveBack()
	}
	signal(w.kick)
}

// renewedPart records part's answers (w.mu held); it returns the holds found
// not held (lost) and those answered after their loss (late, to give back).
func (w *watchdog) renewedPart(batch []*hold, rs []renewal, part []int, sent int64) (lost, late []*hold) {
	now := w.l.clock()
	for _, i := range part {
		h := batch[i]
		h.pending = false
		if rs[i].unseen {
			h.retakes.Store(true)
		}
		mayHaveRun := rs[i].err == nil && rs[i].held || rs[i].err != nil && !neverRan(rs[i].err)
		if mayHaveRun && h.end.Load() == endLost && !w.l.mut.keepLateRenewal {
			// Lost while the renewal was in flight, which may have renewed it.
			late = append(late, h)
			continue
		}
		if h.end.Load() != endLive || h.heapIndex < 0 {
			continue // released or lost meanwhile
		}
		switch {
		case rs[i].err != nil:
			if !neverRan(rs[i].err) {
				h.recordUnknown(rs[i].ttl) // given back if the hold is lost: see settle
			}
			// Retry soon (sooner during a recheck), unless the validity ends first.
			retry := min(max(rs[i].ttl/10, 10*time.Millisecond), time.Second)
			if now < w.recheck {
				retry = min(retry, monitorRetry)
			}
			h.renewAt = now + int64(retry)
			w.fix(h)
		case !rs[i].held:
			lost = append(lost, h)
		default:
			h.renewedFor(rs[i].ttl)
			w.setRenewed(h, sent, rs[i].ttl)
		}
	}
	return lost, late
}

// close stops the scheduler and both senders and returns every hold still
// watched; adds fail from now on. It releases nothing in Redis.
func (w *watchdog) close() []*hold {
	w.mu.Lock()
	w.closed = true
	w.stop()
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	var held []*hold
	var due dueHolds
	for _, h := range w.h {
		h.heapIndex = -1
		if h.unreported && !w.l.mut.closeForgets {
			h.unreported = false
			due.lost = append(due.lost, h) // lost by a reader (expire)
		} else {
			held = append(held, h)
		}
	}
	w.h = nil
	w.queue = nil
	w.mu.Unlock()
	w.settle(&due)
	return held
}

type holdHeap []*hold

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].heapKey < h[j].heapKey }
func (h holdHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *holdHeap) Push(x any) {
	s := x.(*hold)
	s.heapIndex = len(*h)
	*h = append(*h, s)
}
func (h *holdHeap) Pop() any {
	old := *h
	n := len(old)
	s := old[n-1]
	old[n-1] = nil
	s.heapIndex = -1
	*h = old[:n-1]
	return s
}
