package core

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitRoom holds the Locker's waiters, by lock channel and owner, and its
// sharded Pub/Sub subscriptions: one connection per Redis node (one for a
// master or a Sentinel failover client), subscribed to the channels of
// exactly the locks its callers wait for (subscribed with the first waiter
// of a lock, unsubscribed after the last). A release that hands the lock to
// a waiter publishes "g <waiter> <fence> <seq> <ms>" on the lock's channel,
// on the node that holds it; the room passes it to that waiter. "f" (free,
// no queued waiter to hand it to) wakes every waiter of the lock.
type waitRoom struct {
	client redis.UniversalClient

	mu     sync.Mutex
	chans  map[string]*lockWaiters // by channel (the lock hash's key)
	shards map[string]*shard       // by node address ("" for a single node)
	closed bool

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

type lockWaiters struct {
	shard   *shard
	waiters map[string]*waiter // by owner
	// early: grants to owners not (yet) here, kept for a waiter whose
	// queueing attempt was answered after the release that granted it
	// (it joins the room only then); at most maxEarly, dropped with the lock's
	// subscription
	early map[string]grant
}

const maxEarly = 64

// waiter is one Lock call waiting in the lock's queue in Redis.
type waiter struct {
	ch, owner string
	granted   chan grant    // capacity 1: the lock was handed to this waiter
	handed    chan grant    // capacity 1: the lock was handed to another waiter (the latest)
	wake      chan struct{} // capacity 1: a grant to this waiter may have been missed: refresh now
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

// shard is the Pub/Sub connection to one node.
type shard struct {
	kick chan struct{}
	ops  []psOp // (un)subscriptions to send, in order
}

type psOp struct {
	sub bool
	ch  string
}

func newWaitRoom(c redis.UniversalClient) *waitRoom {
	r := &waitRoom{client: c, chans: map[string]*lockWaiters{}, shards: map[string]*shard{}}
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r
}

func newWaiter(ch, owner string) *waiter {
	return &waiter{ch: ch, owner: owner, granted: make(chan grant, 1), handed: make(chan grant, 1), wake: make(chan struct{}, 1)}
}

// add adds w (a Redlock waiter is in the room of every node), subscribing
// to its lock's channel if it is the Locker's first waiter for that lock;
// once the subscription is confirmed, the room checks whether the lock was
// granted to one of its waiters meanwhile (see check). False once the room
// is closed.
func (r *waitRoom) add(w *waiter) bool {
	ch, owner := w.ch, w.owner
	node := r.nodeOf(ch) // outside the lock: it may ask the cluster for its slots
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	lw := r.chans[ch]
	if lw == nil {
		sh := r.shards[node]
		if sh == nil {
			sh = &shard{kick: make(chan struct{}, 1)}
			r.shards[node] = sh
			r.wg.Add(1)
			go r.run(sh)
		}
		lw = &lockWaiters{shard: sh, waiters: map[string]*waiter{}}
		r.chans[ch] = lw
		sh.ops = append(sh.ops, psOp{sub: true, ch: ch})
		signal(sh.kick)
	}
	lw.waiters[owner] = w
	if g, ok := lw.early[owner]; ok {
		delete(lw.early, owner)
		w.granted <- g
	}
	return true
}

// leave removes w; the last waiter of a lock unsubscribes from it.
func (r *waitRoom) leave(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lw := r.chans[w.ch]
	if lw == nil || lw.waiters[w.owner] != w {
		return
	}
	delete(lw.waiters, w.owner)
	if len(lw.waiters) == 0 {
		delete(r.chans, w.ch)
		lw.shard.ops = append(lw.shard.ops, psOp{sub: false, ch: w.ch})
		signal(lw.shard.kick)
	}
}

// nodeOf names the node whose shard channel ch lives on: "" for a client
// of one node.
func (r *waitRoom) nodeOf(ch string) string {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	n, err := cc.MasterForKey(r.ctx, ch)
	if err != nil {
		return ""
	}
	return n.Options().Addr
}

// deliver hands a grant message to its waiter, if it is still here, and
// tells the lock's other waiters how long the new holder has for now (if
// it is gone, the lock is free for them then).
func (r *waitRoom) deliver(ch, payload string) {
	if payload == "f" {
		// Free, and no queued waiter to hand it to: waiters that do not
		// queue (Redlock's) try again.
		r.mu.Lock()
		defer r.mu.Unlock()
		if lw := r.chans[ch]; lw != nil {
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
	if lw.waiters[g.owner] == nil && len(lw.early) < maxEarly {
		if lw.early == nil {
			lw.early = map[string]grant{}
		}
		lw.early[g.owner] = g
	}
	for owner, w := range lw.waiters {
		to := w.handed
		if owner == g.owner {
			to = w.granted
		}
		select {
		case <-w.handed: // only the latest handover counts
		default:
		}
		select {
		case to <- g:
		default:
		}
	}
}

// check is run for channels whose subscription was just confirmed (first
// subscribed, or again after a reconnect): a grant published before then was
// missed, so it asks, in one pipeline, who holds each lock, and wakes that
// waiter if it is one of ours (its next attempt finds it holds the lock and
// claims it). The others need nothing: a grant to them comes after the
// confirmation. If the check fails, every waiter of those locks is woken.
func (r *waitRoom) check(chs []string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, checkTimeout)
		defer cancel()
		cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, ch := range chs {
				p.HGet(ctx, ch, "owner")
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
			if cmds == nil {
				for _, w := range lw.waiters {
					signal(w.wake)
				}
				continue
			}
			if w := lw.waiters[cmds[i].(*redis.StringCmd).Val()]; w != nil {
				signal(w.wake)
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

// run serves one shard's connection: it sends the (un)subscriptions asked
// for and dispatches messages, until the room closes. On a Cluster the
// connection goes to the node of the first channel it subscribes to, which
// is the shard's node.
func (r *waitRoom) run(sh *shard) {
	defer r.wg.Done()
	// The connection is made with the first channel, before anything reads
	// from it: made without one (as the reader would), a Cluster client
	// connects to a random node, where subscribing to this shard's
	// channels fails.
	var ops []psOp
	select {
	case <-r.ctx.Done():
		return
	case <-sh.kick:
		r.mu.Lock()
		ops = sh.ops
		sh.ops = nil
		r.mu.Unlock()
	}
	var first []string // join creates a shard with a subscription: ops[0]
	if len(ops) > 0 && ops[0].sub {
		first, ops = []string{ops[0].ch}, ops[1:]
	}
	ps := r.client.SSubscribe(r.ctx, first...)
	defer ps.Close()
	r.send(ps, ops)
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	var confirmed []string
	for {
		if len(confirmed) > 0 && len(msgs) == 0 {
			r.check(confirmed)
			confirmed = nil
		}
		select {
		case <-r.ctx.Done():
			return
		case <-sh.kick:
			r.mu.Lock()
			ops := sh.ops
			sh.ops = nil
			r.mu.Unlock()
			r.send(ps, ops)
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				r.deliver(m.Channel, m.Payload)
			case *redis.Subscription:
				// Every confirmation, including the resubscription after a
				// reconnect, is checked for a grant published while not
				// subscribed (confirmations that come together, together).
				if m.Kind == "ssubscribe" || m.Kind == "subscribe" {
					confirmed = append(confirmed, m.Channel)
				}
			}
		}
	}
}

// send issues the queued operations in order, merging runs of one kind. A
// failure (Redis down) is left to go-redis, which resubscribes every channel
// it was asked for when it reconnects; waiters refresh on their timers
// meanwhile.
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
			_ = ps.SSubscribe(r.ctx, chs...)
		} else {
			_ = ps.SUnsubscribe(r.ctx, chs...)
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

// join adds a waiter for owner on lock channel ch to the room of every
// Redis deployment of l (one, or a Redlock's nodes: a release on any of
// them wakes it); nil once l is closed.
func (l *Locker) join(ch, owner string) *waiter {
	w := newWaiter(ch, owner)
	for i, r := range l.rooms {
		if !r.add(w) {
			for _, in := range l.rooms[:i] {
				in.leave(w)
			}
			return nil
		}
	}
	return w
}

// leave removes w from every room.
func (l *Locker) leave(w *waiter) {
	for _, r := range l.rooms {
		r.leave(w)
	}
}
