package core

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// shard is the room's Pub/Sub connection to one Redis node, kept subscribed
// to want: the channels of awaited locks whose slot the node serves. See
// docs/design.md, "Waiting and handoff".
type shard struct {
	node string
	kick chan struct{}   // want changed
	want map[string]bool // guarded by the room's mutex
}

// Shard timings.
const (
	// healthEvery: a silent connection is pinged, and replaced after as long again.
	healthEvery = 2 * time.Second
	// minBackoff, maxBackoff bound the wait between (re)connects; the minimum
	// gives a Cluster client time to read its slot map again.
	minBackoff = 25 * time.Millisecond
	maxBackoff = time.Second
	// linger is how long a shard with nothing to subscribe keeps its connection.
	linger = 10 * time.Second
)

// errMoved: the server unsubscribed a channel the shard still wants (slot moved).
var errMoved = errors.New("a channel's slot moved")

// assign puts channel ch on node's shard, starting a new shard if the room
// is open (r.mu held).
func (r *waitRoom) assign(ch string, lw *lockWaiters, node string) {
	sh := r.shards[node]
	if sh == nil {
		sh = &shard{node: node, kick: make(chan struct{}, 1), want: map[string]bool{}}
		r.shards[node] = sh
		if !r.closed {
			r.wg.Go(func() { r.run(sh) })
		}
	}
	lw.shard, lw.since = sh, 0
	sh.want[ch] = true
	signal(sh.kick)
}

// run serves sh until the room closes or sh idles for linger, reconnecting
// after a backoff when the connection fails or a slot moves.
func (r *waitRoom) run(sh *shard) {
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
		sleepCtx(r.ctx, backoff)
		backoff = min(2*backoff, maxBackoff)
		r.regroup(sh)
	}
}

// wanted waits for a channel sh wants and returns it; false when the room
// closes or sh wanted nothing for linger (sh then leaves the room).
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

// sync brings the subscriptions in line with sh.want.
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
			// About to be unsubscribed: forget the lock, unless a waiter joined again.
			if lw := s.r.chans[ch]; lw != nil && lw.shard == s.sh && len(lw.waiters) == 0 {
				delete(s.r.chans, ch)
			}
		}
	}
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

// commands splits chs into (un)subscribe commands: one a channel on a Cluster
// (CROSSSLOT otherwise; mutant merge-subs), else one for all.
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

// serve keeps ps subscribed to sh.want, dispatches what arrives and calls ok
// at each confirmation. It returns what ended the connection (errMoved and
// errMasterMoved included), or nil when sh idles for linger or the room closes.
func (r *waitRoom) serve(sh *shard, ps *redis.PubSub, first, master string, ok func()) error {
	in := make(chan any, 1024)
	done := make(chan struct{})
	defer close(done)
	r.wg.Go(func() { r.read(ps, in, done) })
	if r.failover && !r.noClientInfo.Load() {
		r.wg.Go(func() { r.followMaster(master, in, done) })
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

// answered handles a (un)subscription reply: a confirmed channel is added to
// confirmed; an unsubscription the server made itself is errMoved.
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

// read passes what ps receives to in until done is closed or the connection
// fails (then the error, and it stops).
func (r *waitRoom) read(ps *redis.PubSub, in chan<- any, done <-chan struct{}) {
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

// errMasterMoved: the failover client's master is not the server subscribed on.
var errMasterMoved = errors.New("the master moved to another server")

// followEvery is how often a failover client's shard asks where commands go.
const followEvery = time.Second

// masterAddr is the server a failover client's commands reach now (CLIENT
// INFO's laddr); "" for other clients or on failure. An error reply turns
// following off for the room: it would be refused again.
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

// followMaster sends errMasterMoved on in once the failover client's commands
// reach a server other than master ("": any answer). See docs/design.md,
// "Waiting and handoff".
func (r *waitRoom) followMaster(master string, in chan<- any, done <-chan struct{}) {
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

// lost marks sh's channels unsubscribed after its connection failed.
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

// regroup moves sh's channels whose slot another node now serves to that
// node's shard (Cluster only).
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

// pingOnSilence handles a failed receive: the first timeout since the last
// message sends a ping (nil: receive again); anything else is returned.
func pingOnSilence(ctx context.Context, ps *redis.PubSub, err error, pinged *bool) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !*pinged && ctx.Err() == nil {
		*pinged = true
		return ps.Ping(ctx)
	}
	return err
}
