package core

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitRoom holds the Locker's waiters, by lock channel and owner, and the
// sharded Pub/Sub connections that tell them of grants: one per Redis node
// (one for a master or a Sentinel failover client; see shard.go),
// subscribed to the channels of exactly the locks its callers wait for.
// Whoever frees a lock with a live waiter in its queue (a release, a waiter
// leaving, or an acquire that finds the holder gone) grants it to that
// waiter in Redis and publishes "g <waiter> <fence> <seq> <ms>" on the
// lock's channel, on the node that holds it; the room passes it to that
// waiter, and keeps it as the lock's latest handover, which the lock's
// other waiters read when they next wake; it nudges those of them whose
// next wake comes after the new holder's first expiry (if the new holder
// is gone, the lock is free then). "f" (free, no queued waiter to hand it to) wakes every
// waiter of the lock.
//
// A waiter learns of its grant whatever the order of the grant's message,
// the reply to its queueing attempt and its joining the room: a message
// that arrives first is kept (early) for the waiter that joins after it; a
// waiter that joins when the room may have missed one (its channel's
// subscription was confirmed only during the waiter's attempt, or early
// grants were pushed out since) is woken, and its next attempt finds in
// Redis that it holds the lock; and after every (re)subscription the room
// asks Redis who holds each lock, and wakes that waiter (check).
type waitRoom struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // client, when it is a Cluster client
	// failover: client is a Sentinel failover client, whose shard follows
	// the master (see followMaster)
	failover bool
	// noClientInfo: the server refused CLIENT INFO (an ACL without
	// +client|info, a renamed command): the shard does not follow the master
	noClientInfo atomic.Bool
	clock        func() int64 // the Locker's monotonic clock (ns)
	mut          *mutants

	mu     sync.Mutex
	chans  map[string]*lockWaiters // by channel (the lock hash's key)
	shards map[string]*shard       // by node address ("" for a single node)
	closed bool

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

type lockWaiters struct {
	shard *shard
	// waiters is a slice, so that a grant's scan of them (handOver) costs
	// about a nanosecond a waiter; at indexes it by owner
	waiters []*waiter
	at      map[string]int
	// since is when the channel's subscription was last confirmed (on the
	// room's clock), 0 while it is not (being made, or its connection
	// lost): every grant published after the confirmation reaches the room.
	since int64
	// early holds the latest grants to owners not (yet) here, oldest first:
	// a waiter whose queueing reply comes after its grant's message finds
	// it here. dropped is when the newest grant pushed out of it arrived
	// (0: none was).
	early   []earlyGrant
	dropped int64
	// freed is when the latest "f" (free, no queued waiter to hand it to)
	// arrived (0: none did): a waiter that does not queue (Redlock's)
	// whose attempt was sent before then joins after the message, which
	// woke no one for it, and looks again.
	freed int64
	// last is the latest handover the room saw for this lock (a grant to a
	// waiter, or the holder a check found; nil: none). Waiters read it
	// when they wake (readHandovers); one that joins after it, with an
	// attempt sent before it, is told of it (see add).
	last atomic.Pointer[handover]
}

// handover is a change of holder as the lock's other waiters see it: when
// it was learnt, and how long that holder has before its first expiry (if
// it is gone, the lock is free for them then). Told by a grant's message,
// or found by a check (see check): a found one is the hold's TTL when the
// check asked, and may be older than a waiter's own reply, so it only
// ever shortens what the waiter knows of the holder.
type handover struct {
	to     string // the holder (owner)
	learnt int64  // when, on the room's clock (the Locker's)
	life   time.Duration
	found  bool
}

type earlyGrant struct {
	g  grant
	at int64 // when it arrived (the room's clock)
}

// maxEarly bounds early per lock: a waiter that may have lost its grant to
// the bound looks in Redis instead.
const maxEarly = 32

// waiter is one Lock call waiting in the lock's queue in Redis.
type waiter struct {
	ch, owner string
	granted   chan grant    // capacity 1: the lock was handed to this waiter
	wake      chan struct{} // capacity 1: a grant to this waiter may have been missed: look now
	// nudge (capacity 1): the lock was handed to another waiter whose first
	// expiry comes before until, when this waiter planned to wake next (the
	// room's clock, ns): it reads the handover and sleeps again
	nudge chan struct{}
	until atomic.Int64
	// views are the lock's entries in the rooms w is in (one per Redis
	// deployment) and the handover w last read from each; only w's own
	// goroutine uses them
	views []handoverView
}

type handoverView struct {
	lw   *lockWaiters
	seen *handover
}

// grant is what a release told: the waiter it handed the lock to, the fence
// of its hold, the refresh of the waiter's queue entry the hold's first
// expiry is based on, and how long that first expiry is.
type grant struct {
	owner string
	fence int64
	seq   int
	life  time.Duration
}

func newWaitRoom(c redis.UniversalClient, clock func() int64, mut *mutants) *waitRoom {
	r := &waitRoom{client: c, clock: clock, mut: mut, chans: map[string]*lockWaiters{}, shards: map[string]*shard{}}
	r.cluster, _ = c.(*redis.ClusterClient)
	r.failover = isFailoverClient(c) && !mut.stayOnMaster
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r
}

func newWaiter(ch, owner string) *waiter {
	w := &waiter{ch: ch, owner: owner, granted: make(chan grant, 1), wake: make(chan struct{}, 1), nudge: make(chan struct{}, 1)}
	w.until.Store(math.MaxInt64) // until it plans a wake, every handover nudges it
	return w
}

// add adds w, whose queueing attempt was sent at sent (the room's clock),
// subscribing to its lock's channel if it is the Locker's first waiter for
// that lock, and hands it a grant the room may already have seen (see
// waitRoom). False once the room is closed.
func (r *waitRoom) add(w *waiter, sent int64) bool {
	// Outside the lock, and without loading the slot map: a waiter joins
	// on its caller's goroutine, whose budget a load (one round trip per
	// seed, each bounded by the client's read timeout) would not respect.
	slots := noLoad
	if r.mut.loadSlots {
		slots = r.ctx
	}
	node := r.nodeOf(slots, w.ch)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	lw := r.chans[w.ch]
	switch {
	case lw == nil:
		lw = &lockWaiters{at: map[string]int{}}
		r.chans[w.ch] = lw
		r.assign(w.ch, lw, node)
	case len(lw.waiters) == 0 && r.shards[node] != lw.shard:
		r.assign(w.ch, lw, node) // its slot moved since the last waiter left
	case len(lw.waiters) == 0:
		// The last waiter left, and the shard has not unsubscribed yet:
		// the subscription goes on, with the grants it kept meanwhile.
		lw.shard.want[w.ch] = true
		signal(lw.shard.kick)
	}
	lw.add(w)
	switch {
	case lw.since == 0:
		// The confirmation to come is checked (check), w included.
	case lw.takeEarly(w):
	case r.mut.dropEarly:
	case lw.since > sent || lw.dropped >= sent || lw.freed >= sent && lw.freed > 0:
		signal(w.wake)
	}
	v := handoverView{lw: lw, seen: lw.last.Load()}
	if v.seen != nil && v.seen.learnt >= sent && !r.mut.lateJoinBlind {
		// A handover since its attempt was sent, which its reply may not
		// know of: the lock may be free sooner than that reply said.
		v.seen = nil
	}
	w.views = append(w.views, v)
	return true
}

// add adds w (r.mu held).
func (lw *lockWaiters) add(w *waiter) {
	if i, ok := lw.at[w.owner]; ok {
		lw.waiters[i] = w
		return
	}
	lw.at[w.owner] = len(lw.waiters)
	lw.waiters = append(lw.waiters, w)
}

// remove removes w, moving the last waiter into its place; false if w is
// not here (r.mu held).
func (lw *lockWaiters) remove(w *waiter) bool {
	i, ok := lw.at[w.owner]
	if !ok || lw.waiters[i] != w {
		return false
	}
	last := len(lw.waiters) - 1
	moved := lw.waiters[last]
	lw.waiters[i], lw.at[moved.owner] = moved, i
	lw.waiters[last] = nil
	lw.waiters = lw.waiters[:last]
	delete(lw.at, w.owner)
	return true
}

// waiter returns the waiter of owner, nil if none (r.mu held).
func (lw *lockWaiters) waiter(owner string) *waiter {
	if i, ok := lw.at[owner]; ok {
		return lw.waiters[i]
	}
	return nil
}

// takeEarly hands w the early grant to its owner, if there is one.
func (lw *lockWaiters) takeEarly(w *waiter) bool {
	for i, e := range lw.early {
		if e.g.owner == w.owner {
			lw.early = append(lw.early[:i], lw.early[i+1:]...)
			w.granted <- e.g
			return true
		}
	}
	return false
}

// keepEarly keeps g, a grant to an owner not here, for a waiter that joins
// later (r.mu held).
func (lw *lockWaiters) keepEarly(g grant, at int64) {
	if len(lw.early) == maxEarly {
		lw.dropped = lw.early[0].at
		lw.early = append(lw.early[:0], lw.early[1:]...)
	}
	lw.early = append(lw.early, earlyGrant{g, at})
}

// leave removes w; the last waiter of a lock unsubscribes from it. Until
// the shard has sent the unsubscription, the lock's entry stays, keeping
// the grants that arrive meanwhile (and when its subscription was
// confirmed) for a waiter that joins before then: its grant may be one of
// them, and its joining would not make the shard subscribe, and check,
// again.
func (r *waitRoom) leave(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lw := r.chans[w.ch]
	if lw == nil || !lw.remove(w) {
		return
	}
	if len(lw.waiters) > 0 {
		return
	}
	if lw.shard == nil || lw.since == 0 || r.mut.forgetLeft {
		delete(r.chans, w.ch)
	}
	if lw.shard != nil {
		delete(lw.shard.want, w.ch)
		signal(lw.shard.kick)
	}
}

// unsubscribing forgets the locks in chs, which sh is about to unsubscribe
// from, unless a waiter joined again (r.mu held).
func (r *waitRoom) unsubscribing(sh *shard, chs []string) {
	for _, ch := range chs {
		if lw := r.chans[ch]; lw != nil && lw.shard == sh && len(lw.waiters) == 0 {
			delete(r.chans, ch)
		}
	}
}

// nodeOf names the node whose shard channel ch lives on: "" for a client
// of one node, or when the cluster cannot say (the shard then finds out).
// Given noLoad it sends nothing: it answers from the slot map the client
// has, "" when it has none yet.
func (r *waitRoom) nodeOf(ctx context.Context, ch string) string {
	if r.cluster == nil {
		return ""
	}
	n, err := r.cluster.MasterForKey(ctx, ch)
	if err != nil {
		return ""
	}
	return n.Options().Addr
}

// noLoad is an ended context: a call given it sends nothing, so a Cluster
// client answers from the slot map it has, or fails at once.
var noLoad = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// deliver hands a grant message to its waiter, or keeps it for a waiter
// that has not joined yet, and makes it the lock's latest handover for its
// other waiters (handOver).
func (r *waitRoom) deliver(ch, payload string) {
	if payload == "f" {
		// Free, and no queued waiter to hand it to: waiters that do not
		// queue (Redlock's) try again.
		r.mu.Lock()
		defer r.mu.Unlock()
		if lw := r.chans[ch]; lw != nil {
			if !r.mut.forgetFree {
				lw.freed = r.clock()
			}
			for _, w := range lw.waiters {
				signal(w.wake)
			}
		}
		return
	}
	g, ok := parseGrant(payload)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lw := r.chans[ch]
	if lw == nil {
		return
	}
	now := r.clock()
	r.handOver(lw, &handover{to: g.owner, learnt: now, life: g.life})
	w := lw.waiter(g.owner)
	if w == nil {
		if !r.mut.dropEarly {
			lw.keepEarly(g, now)
		}
		return
	}
	select {
	case w.granted <- g:
	default:
	}
}

// handOver makes h the lock's latest handover, for its other waiters to
// read when they next wake, and nudges those whose next wake comes after
// its first expiry (r.mu held).
func (r *waitRoom) handOver(lw *lockWaiters, h *handover) {
	lw.last.Store(h)
	if r.mut.noNudge {
		return
	}
	ends := h.learnt + int64(h.life)
	for _, w := range lw.waiters {
		if ends < w.until.Load() && w.owner != h.to {
			signal(w.nudge)
		}
	}
}

// readHandovers calls f with each handover to another waiter that the
// rooms learnt since w last read them (the latest, per room). Only w's own
// goroutine calls it.
func (w *waiter) readHandovers(f func(handover)) {
	for i := range w.views {
		v := &w.views[i]
		h := v.lw.last.Load()
		if h == nil || h == v.seen {
			continue
		}
		v.seen = h
		if h.to != w.owner {
			f(*h)
		}
	}
}

// confirmed records that sh's subscription to ch was confirmed; false if
// ch is no longer sh's.
func (r *waitRoom) confirmed(sh *shard, ch string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	lw := r.chans[ch]
	if lw == nil || lw.shard != sh {
		return false
	}
	lw.since = r.clock()
	return true
}

// check is run for channels whose subscription was just confirmed (first
// subscribed, or again after a reconnect): a grant published before then was
// missed, so it asks, in one pipeline, who holds each lock and for how long.
// It wakes the holder if it is one of ours (its next attempt finds it holds
// the lock and claims it), and leaves the hold as a handover with the other
// waiters (if its holder is a waiter that is gone, the lock is free when
// that TTL ends; a grant that arrived after the question is newer and
// stands). A lock that no one holds (its holder gone without a release, or
// Redis restarted empty) wakes every waiter of it, whose attempts take it
// or hand it to the first live waiter. So does a hash without an owner, a
// semaphore's or readers': the check cannot tell whether it has room or
// which waiters a permit went to, and each waiter's attempt can. A grant
// published after the confirmation reaches the room. If the check fails,
// every waiter of those locks is woken.
func (r *waitRoom) check(chs []string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, checkTimeout)
		defer cancel()
		asked := r.clock()
		cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, ch := range chs {
				p.HGet(ctx, ch, "owner")
				p.PTTL(ctx, ch)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			cmds = nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, ch := range chs {
			lw := r.chans[ch]
			if lw == nil {
				continue
			}
			h := &handover{learnt: asked, found: true}
			if cmds != nil {
				h.to = cmds[2*i].(*redis.StringCmd).Val()
				h.life = cmds[2*i+1].(*redis.DurationCmd).Val()
			}
			if h.to == "" && !r.mut.checkOwner {
				for _, w := range lw.waiters {
					signal(w.wake)
				}
				continue
			}
			if w := lw.waiter(h.to); w != nil {
				signal(w.wake)
			}
			if last := lw.last.Load(); h.life > 0 && (last == nil || last.learnt < asked) && !r.mut.lateJoinBlind {
				r.handOver(lw, h)
			}
		}
	}()
}

// checkTimeout bounds a check: past it, the waiters are woken instead.
const checkTimeout = 2 * time.Second

func parseGrant(p string) (grant, bool) {
	f := strings.Fields(p)
	if len(f) != 5 || f[0] != "g" {
		return grant{}, false
	}
	fence, err1 := strconv.ParseInt(f[2], 10, 64)
	seq, err2 := strconv.Atoi(f[3])
	life, err3 := strconv.ParseInt(f[4], 10, 64)
	return grant{owner: f[1], fence: fence, seq: seq, life: time.Duration(life) * time.Millisecond}, err1 == nil && err2 == nil && err3 == nil
}

func (r *waitRoom) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
}

// join adds a waiter for owner on lock channel ch, whose queueing attempt
// was sent at sent, to the room of every Redis deployment of l (one, or a
// Redlock's nodes: a release on any of them wakes it); nil once l is
// closed.
func (l *Locker) join(ch, owner string, sent int64) *waiter {
	w := newWaiter(ch, owner)
	for i, r := range l.waitRooms {
		if !r.add(w, sent) {
			for _, in := range l.waitRooms[:i] {
				in.leave(w)
			}
			return nil
		}
	}
	return w
}

// leave removes w from every room.
func (l *Locker) leave(w *waiter) {
	for _, r := range l.waitRooms {
		r.leave(w)
	}
}
