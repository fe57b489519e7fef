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

// waitRoom holds a Locker's waiters by lock channel and owner, and its Pub/Sub
// shards (one per node), passing each grant ("g <owner> <fence> <seq> <ms>") to
// its waiter; a free lock ("f") wakes every waiter of it, and the latest
// handover is kept for the others. See docs/internals.md, "The wait room (`room.go`, `shard.go`)".
type waitRoom struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // client, when it is a Cluster client
	// failover: a Sentinel failover client; its shard follows the master (followMaster)
	failover bool
	// noClientInfo: the server refused CLIENT INFO, so no shard follows the master
	noClientInfo atomic.Bool
	clock        func() int64 // the Locker's monotonic clock (ns)
	mut          *mutants
	checked      func() // tests' signal: a check ended (nil: none; export_test.go)
	delivered    func() // tests' signal: a message was handled (nil: none; export_test.go)

	mu     sync.Mutex
	chans  map[string]*lockWaiters // by channel (the lock hash's key)
	shards map[string]*shard       // by node address ("" for a single node)
	closed bool

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// lockWaiters is the room's entry for one lock channel (r.mu guards all but last).
type lockWaiters struct {
	shard *shard
	// waiters is a slice so that handOver's scan is cheap; at indexes it by owner
	waiters []*waiter
	at      map[string]int
	// since is when the subscription was last confirmed (room's clock), 0 while not.
	since int64
	// early keeps the latest grants to owners not here yet, oldest first;
	// dropped is when the newest grant pushed out of it arrived (0: none).
	early   []earlyGrant
	dropped int64
	// freed is when the latest "f" arrived (0: none): a Redlock waiter whose
	// attempt was sent before it looks again on joining.
	freed int64
	// last is the lock's latest handover (a grant, or a holder a check found).
	last atomic.Pointer[handover]
}

// handover is a change of holder as the lock's other waiters see it: who,
// when it was learnt, how long until its first expiry; a found one (from a
// check) only ever shortens what a waiter knows (acquisition.sawHandover).
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
	// nudge (capacity 1): a handover whose first expiry comes before until,
	// this waiter's planned next wake (room's clock, ns)
	nudge chan struct{}
	until atomic.Int64
	// views: w's entry in each room and the handover last read; w's goroutine only
	views []handoverView
}

type handoverView struct {
	lw   *lockWaiters
	seen *handover
}

// grant is a parsed grant message: the new holder, its fence, the queue
// refresh (seq) its first expiry counts from, and that first life.
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

// add adds w, whose queueing attempt was sent at sent (room's clock),
// subscribing to the lock's channel if needed, and hands it or wakes it for a
// grant the room may have seen or missed. False once the room is closed.
func (r *waitRoom) add(w *waiter, sent int64) bool {
	// No slot map load: it would run on the caller's goroutine, past its budget.
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
		// Not unsubscribed yet: keep the subscription and the grants it kept.
		lw.shard.want[w.ch] = true
		signal(lw.shard.kick)
	}
	lw.add(w)
	switch {
	case lw.since == 0:
		// The coming confirmation's check covers w.
	case lw.takeEarly(w):
	case r.mut.dropEarly:
	case lw.since > sent || lw.dropped >= sent || lw.freed >= sent && lw.freed > 0:
		signal(w.wake)
	}
	v := handoverView{lw: lw, seen: lw.last.Load()}
	if v.seen != nil && v.seen.learnt >= sent && !r.mut.lateJoinBlind {
		// Its reply may predate this handover: let w read it.
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

// remove removes w (swapping in the last waiter); false if w is not here (r.mu held).
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

// leave removes w; the last waiter of a lock unsubscribes from it. The entry
// and its grants stay until the shard unsubscribes (mutant forget-left): see
// docs/internals.md, "The wait room (`room.go`, `shard.go`)".
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
	if lw.since == 0 || r.mut.forgetLeft {
		delete(r.chans, w.ch)
	}
	delete(lw.shard.want, w.ch)
	signal(lw.shard.kick)
}

// nodeOf names the node that serves channel ch: "" for a one-node client or
// when unknown. Given noLoad it sends nothing.
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

// noLoad is an ended context: a Cluster client given it answers from the
// slot map it has, or fails at once.
var noLoad = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// deliver handles a message on ch: a grant goes to its waiter (or early)
// and becomes the lock's latest handover; "f" wakes every waiter.
func (r *waitRoom) deliver(ch, payload string) {
	g, ok := parseGrant(payload)
	if !ok && payload != "f" {
		return
	}
	if r.delivered != nil {
		defer r.delivered() // deferred before the unlock, so it runs after it
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lw := r.chans[ch]
	switch {
	case lw == nil:
	case payload == "f": // free with no queued waiter: Redlock's waiters try again
		if !r.mut.forgetFree {
			lw.freed = r.clock()
		}
		for _, w := range lw.waiters {
			signal(w.wake)
		}
	default:
		now := r.clock()
		r.handOver(lw, &handover{to: g.owner, learnt: now, life: g.life})
		if w := lw.waiter(g.owner); w != nil {
			select {
			case w.granted <- g:
			default:
			}
		} else if !r.mut.dropEarly { // kept for a waiter that joins later
			if len(lw.early) == maxEarly {
				lw.dropped = lw.early[0].at
				lw.early = append(lw.early[:0], lw.early[1:]...)
			}
			lw.early = append(lw.early, earlyGrant{g, now})
		}
	}
}

// handOver makes h the lock's latest handover and nudges the waiters whose
// next wake comes after its first expiry (r.mu held).
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

// readHandovers calls f with each room's latest handover to another waiter
// that w has not read yet. Only w's goroutine calls it.
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

// confirmed records sh's confirmed subscription to ch; false if ch is no longer sh's.
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

// check asks Redis who holds each of chs (just subscribed: grants may have been
// missed) and for how long, wakes that holder's waiter and records a handover
// (unless a newer one came);
// no owner, or no answer, wakes every waiter. See docs/design.md, "Waiting and handoff".
func (r *waitRoom) check(chs []string) {
	r.wg.Go(func() {
		if r.checked != nil {
			defer r.checked()
		}
		ctx, cancel := context.WithTimeout(r.ctx, checkTimeout)
		defer cancel()
		asked := r.clock()
		c := redis.Cmdable(r.client)
		if r.cluster != nil && r.cluster.Options().ReadOnly && !r.mut.checkReplica {
			// Not a replica, which may not have the latest grant yet: the
			// master of chs (one shard's, one node's; a moved slot: no answer).
			if m, err := r.cluster.MasterForKey(ctx, chs[0]); err == nil {
				c = m
			}
		}
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
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
	})
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

// join adds a waiter for owner on channel ch, whose attempt was sent at sent,
// to every room of l (a Redlock has one per node); nil once l is closed.
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
