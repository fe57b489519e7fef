package core

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// shard is the room's Pub/Sub connection to one Redis node: it keeps that
// connection subscribed to want, the channels of the locks the Locker's
// callers wait for whose slot the node serves. Each channel is subscribed
// with an SSUBSCRIBE of its own: a Cluster refuses one naming channels of
// several slots (CROSSSLOT), which is also why a connection that fails is
// not left to go-redis's reconnection (it subscribes every channel in one
// command, on the node of any one of them): the shard closes it and makes
// a new one, after the cluster's slot map is read again, and the channels
// that moved to another node (slot migration, failover) go to that node's
// shard. Until the new subscriptions are confirmed and checked (see
// waitRoom.check), waiters are covered by what the room does for a channel
// whose subscription is not confirmed.
type shard struct {
	node string
	kick chan struct{}   // want changed
	want map[string]bool // guarded by the room's mutex
}

// Shard timings.
const (
	// healthEvery is how long a shard's connection may be silent before it
	// is pinged; silent for as long again after the ping, it is replaced.
	healthEvery = 2 * time.Second
	// minBackoff and maxBackoff bound the wait between two attempts to
	// (re)connect: long enough for a Cluster client to read the slot map
	// again, at most a second.
	minBackoff = 25 * time.Millisecond
	maxBackoff = time.Second
	// linger is how long a shard with nothing to subscribe keeps its
	// connection before it goes (the next waiter makes a new one).
	linger = 10 * time.Second
)

// errMoved: the server unsubscribed a channel the shard still wants (its
// slot moved to another node).
var errMoved = errors.New("a channel's slot moved")

// assign puts channel ch of lw on the shard of node, starting the shard if
// it is new and the room is open (r.mu held).
func (r *waitRoom) assign(ch string, lw *lockWaiters, node string) {
	sh := r.shards[node]
	if sh == nil {
		sh = &shard{node: node, kick: make(chan struct{}, 1), want: map[string]bool{}}
		r.shards[node] = sh
		if !r.closed {
			r.wg.Add(1)
			go r.run(sh)
		}
	}
	lw.shard, lw.since = sh, 0
	sh.want[ch] = true
	signal(sh.kick)
}

// run serves one shard until the room closes, or until it has had nothing
// to subscribe for linger: it connects, subscribes, dispatches messages,
// and when the connection fails (or a slot moves) starts again after a
// backoff.
func (r *waitRoom) run(sh *shard) {
	defer r.wg.Done()
	backoff := minBackoff
	for {
		first, ok := r.wanted(sh)
		if !ok {
			return
		}
		master := r.masterAddr() // before the dial: see followMaster
		ps := r.client.SSubscribe(r.ctx, first)
		err := r.serve(sh, ps, first, master, func() { backoff = minBackoff })
		ps.Close()
		if err == nil || r.ctx.Err() != nil {
			continue // nothing wanted for a while: wanted decides
		}
		r.lost(sh)
		if r.cluster != nil {
			r.cluster.ReloadState(r.ctx) // in the background; read after the backoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-r.ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, maxBackoff)
		r.regroup(sh)
	}
}

// wanted waits until sh has a channel to subscribe and returns one, or
// returns false when the room closes, or when sh has wanted nothing for
// linger (sh is then no longer the room's).
func (r *waitRoom) wanted(sh *shard) (string, bool) {
	idle := time.NewTimer(linger)
	defer idle.Stop()
	for {
		if r.ctx.Err() != nil {
			return "", false // closed, though a waiter may not have left yet
		}
		r.mu.Lock()
		for ch := range sh.want {
			r.mu.Unlock()
			return ch, true
		}
		r.mu.Unlock()
		select {
		case <-r.ctx.Done():
			return "", false
		case <-sh.kick:
		case <-idle.C:
			r.mu.Lock()
			gone := len(sh.want) == 0
			if gone {
				delete(r.shards, sh.node)
			}
			r.mu.Unlock()
			if gone {
				return "", false
			}
		}
	}
}

// subscription is a shard's connection and what it is subscribed to.
type subscription struct {
	r     *waitRoom
	sh    *shard
	ps    *redis.PubSub
	have  map[string]bool // subscribed (or the SSUBSCRIBE sent)
	unsub map[string]int  // SUNSUBSCRIBEs sent, not yet confirmed
}

// sync subscribes the channels sh wants and unsubscribes those it no
// longer does.
func (s *subscription) sync() error {
	s.r.mu.Lock()
	var add, drop []string
	for ch := range s.sh.want {
		if !s.have[ch] {
			add = append(add, ch)
		}
	}
	for ch := range s.have {
		if !s.sh.want[ch] {
			drop = append(drop, ch)
		}
	}
	s.r.unsubscribing(s.sh, drop)
	s.r.mu.Unlock()
	for _, chs := range s.commands(add) {
		if err := s.ps.SSubscribe(s.r.ctx, chs...); err != nil {
			return err
		}
		for _, ch := range chs {
			s.have[ch] = true
		}
	}
	for _, chs := range s.commands(drop) {
		if err := s.ps.SUnsubscribe(s.r.ctx, chs...); err != nil {
			return err
		}
		for _, ch := range chs {
			delete(s.have, ch)
			s.unsub[ch]++
		}
	}
	return nil
}

// commands splits chs into what one command may name: all of them on one
// node; on a Cluster, one a command (their slots differ).
func (s *subscription) commands(chs []string) [][]string {
	if len(chs) == 0 {
		return nil
	}
	if s.r.cluster == nil || s.r.mut.mergeSubs {
		return [][]string{chs}
	}
	out := make([][]string, len(chs))
	for i := range chs {
		out[i] = chs[i : i+1]
	}
	return out
}

// serve keeps ps subscribed to sh.want (first is subscribed already) and
// dispatches what arrives, until the connection fails, a channel's slot
// moves or (a Sentinel failover client) the master is no longer master,
// the error; or sh has wanted nothing for linger, or the room closes (nil).
// ok is called at each confirmation.
func (r *waitRoom) serve(sh *shard, ps *redis.PubSub, first, master string, ok func()) error {
	in := make(chan any, 1024)
	done := make(chan struct{})
	defer close(done)
	r.wg.Add(1)
	go r.read(ps, in, done)
	if r.failover && !r.noClientInfo.Load() {
		r.wg.Add(1)
		go r.followMaster(master, in, done)
	}
	sub := &subscription{r: r, sh: sh, ps: ps, have: map[string]bool{first: true}, unsub: map[string]int{}}
	have := sub.have
	if err := sub.sync(); err != nil {
		return err
	}
	idle := time.NewTimer(linger)
	defer idle.Stop()
	var confirmed []string
	for {
		if len(confirmed) > 0 && len(in) == 0 {
			r.check(confirmed)
			confirmed = nil
		}
		select {
		case <-r.ctx.Done():
			return nil
		case <-idle.C:
			if len(have) == 0 {
				return nil
			}
			idle.Reset(linger)
		case <-sh.kick:
			if err := sub.sync(); err != nil {
				return err
			}
			if len(have) == 0 {
				idle.Reset(linger)
			}
		case m := <-in:
			switch m := m.(type) {
			case error:
				return m
			case *redis.Message:
				r.deliver(m.Channel, m.Payload)
			case *redis.Subscription:
				var err error
				if confirmed, err = sub.answered(m, confirmed, ok); err != nil {
					return err
				}
			}
		}
	}
}

// answered takes in the server's answer m to a (un)subscription: a
// confirmed channel is added to confirmed (and ok called); an
// unsubscription the server made itself (its slot moved) is errMoved.
func (s *subscription) answered(m *redis.Subscription, confirmed []string, ok func()) ([]string, error) {
	r, unsub := s.r, s.unsub
	switch {
	case m.Kind == "ssubscribe" || m.Kind == "subscribe":
		if r.confirmed(s.sh, m.Channel) {
			confirmed = append(confirmed, m.Channel)
			ok()
		}
	case unsub[m.Channel] > 0:
		if unsub[m.Channel]--; unsub[m.Channel] == 0 {
			delete(unsub, m.Channel)
		}
	case s.have[m.Channel] && !r.mut.staySubscribed:
		return confirmed, errMoved // the server dropped it: its slot is elsewhere now
	}
	return confirmed, nil
}

// read passes what ps receives to in until done is closed, and the
// first failure of the connection, after which it stops: a connection
// silent for healthEvery is pinged, and one still silent healthEvery later
// counts as failed.
func (r *waitRoom) read(ps *redis.PubSub, in chan<- any, done <-chan struct{}) {
	defer r.wg.Done()
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(r.ctx, healthEvery)
		var re redis.Error
		if err != nil && r.mut.mergeSubs && errors.As(err, &re) {
			continue // the mutant: an error reply swallowed, as go-redis's own channel does
		}
		if err != nil {
			if err = pingOnSilence(r.ctx, ps, err, &pinged); err == nil {
				continue
			}
			select {
			case in <- err:
			case <-done:
			}
			return
		}
		pinged = false
		select {
		case in <- m:
		case <-done:
			return
		}
	}
}

// errMasterMoved: a Sentinel failover client's master is another server
// than the one the shard subscribed on.
var errMasterMoved = errors.New("the master moved to another server")

// followEvery is how often a Sentinel failover client's shard asks which
// server its commands reach.
const followEvery = time.Second

// masterAddr is the address of the server a Sentinel failover client's
// commands reach now (CLIENT INFO's laddr); "" for another client, when
// the call failed (the shard's follower then asks again), or when the
// server refused it: an error reply (no permission, a renamed command)
// turns following off for the room, since it would be refused again.
func (r *waitRoom) masterAddr() string {
	if !r.failover || r.noClientInfo.Load() {
		return ""
	}
	ctx, cancel := context.WithTimeout(r.ctx, healthEvery)
	defer cancel()
	info, err := r.client.ClientInfo(ctx).Result()
	var refused redis.Error
	if errors.As(err, &refused) {
		r.noClientInfo.Store(true)
	}
	if err != nil {
		return ""
	}
	return info.LAddr
}

// followMaster tells serve (errMasterMoved on in) when the commands of a
// Sentinel failover client reach another server than master, the one
// they reached before the shard dialled ("" when that was not answered:
// the first answer then counts as a move, so the shard dials again and
// knows where it is). go-redis moves its command
// connections to the new master at a failover, but not a Pub/Sub one:
// subscribed on the old master, now a replica, the shard would get the new
// master's grants only once that replica syncs, seconds later or, cut off
// from the new master, never. The shard then subscribes again on the new
// master and the room checks its locks (see check).
func (r *waitRoom) followMaster(master string, in chan<- any, done <-chan struct{}) {
	defer r.wg.Done()
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if r.noClientInfo.Load() {
			return
		}
		if now := r.masterAddr(); now != "" && now != master {
			select {
			case in <- errMasterMoved:
			case <-done:
			}
			return
		}
	}
}

// lost marks the channels of sh as not subscribed: its connection failed.
func (r *waitRoom) lost(sh *shard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch, lw := range r.chans {
		switch {
		case lw.shard != sh:
		case len(lw.waiters) == 0:
			delete(r.chans, ch) // left, and unsubscribed with the connection
		default:
			lw.since = 0
		}
	}
}

// regroup, on a Cluster, moves the channels of sh whose slot another node
// now serves (as the client's slot map says) to that node's shard.
func (r *waitRoom) regroup(sh *shard) {
	if r.cluster == nil {
		return
	}
	r.mu.Lock()
	chs := make([]string, 0, len(sh.want))
	for ch := range sh.want {
		chs = append(chs, ch)
	}
	r.mu.Unlock()
	nodes := make([]string, len(chs))
	for i, ch := range chs {
		nodes[i] = r.nodeOf(r.ctx, ch)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ch := range chs {
		lw := r.chans[ch]
		if nodes[i] == sh.node || nodes[i] == "" || lw == nil || lw.shard != sh || !sh.want[ch] {
			continue
		}
		delete(sh.want, ch)
		r.assign(ch, lw, nodes[i])
	}
}

// pingOnSilence handles err, a failed receive on a Pub/Sub connection: the
// first timeout since the last message pings the connection (nil when the
// ping was sent: receive again, its answer is the next message); anything
// else, a second silence included, is the connection's failure, returned.
func pingOnSilence(ctx context.Context, ps *redis.PubSub, err error, pinged *bool) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !*pinged && ctx.Err() == nil {
		*pinged = true
		return ps.Ping(ctx)
	}
	return err
}
