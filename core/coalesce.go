package core

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// coalescer sends a Locker's acquires and releases to a plain client (or, on
// a Cluster, those of one master's keys) in at most coalesceSlots round trips
// at once; later calls queue as one pipeline. A queued call may still be sent
// after its caller gave up: the caller undoes it. See docs/internals.md,
// "Coalescing".
type coalescer struct {
	c      redis.UniversalClient
	spawn  func(func()) bool // runs a batch on a goroutine the Locker tracks; false once closed
	queued func()            // tests' signal: a call queued (nil: none; export_test.go)

	mu       sync.Mutex
	inFlight int    // round trips in flight, at most coalesceSlots
	queue    *batch // the calls waiting for a round trip; nil: none
}

const coalesceSlots = 4

// batch is the calls queued while every slot was busy; done closes on the answer.
type batch struct {
	calls []scriptCall
	done  chan struct{}
}

// run sends q (EVALSHA, EVAL on NOSCRIPT) and returns its answered command,
// or one failed with ctx's error if ctx ended while it was queued.
func (p *coalescer) run(ctx context.Context, script *script, q once) *redis.Cmd {
	p.mu.Lock()
	if p.inFlight < coalesceSlots {
		p.inFlight++
		p.mu.Unlock()
		cmd := script.send(ctx, p.c, q)
		p.next(ctx)
		return cmd
	}
	b := p.queue
	if b == nil {
		b = &batch{done: make(chan struct{})}
		p.queue = b
	}
	i := len(b.calls)
	b.calls = append(b.calls, scriptCall{script: script, cmd: q.Cmd})
	p.mu.Unlock()
	if p.queued != nil {
		p.queued()
	}
	select {
	case <-b.done:
		return b.calls[i].cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// take returns the queue to send in the slot just answered, or frees the slot.
func (p *coalescer) take() *batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.queue
	if b == nil {
		p.inFlight--
		return nil
	}
	p.queue = nil
	return b
}

// next hands the answered slot to the queue, sent on a goroutine of the
// Locker (here once closed) so the answered caller returns at once.
func (p *coalescer) next(ctx context.Context) {
	first := p.take()
	if first == nil {
		return
	}
	bctx := context.WithoutCancel(ctx)
	drain := func() {
		for b := first; b != nil; b = p.take() {
			p.send(bctx, b)
		}
	}
	if !p.spawn(drain) {
		drain()
	}
}

// send runs b as one pipeline (see pipeScripts), or a lone call alone, then
// answers its callers.
func (p *coalescer) send(ctx context.Context, b *batch) {
	if len(b.calls) == 1 {
		q := &b.calls[0]
		q.cmd = q.script.send(ctx, p.c, once{q.cmd})
		close(b.done)
		return
	}
	calls := make([]*scriptCall, len(b.calls))
	for i := range b.calls {
		calls[i] = &b.calls[i]
	}
	pipeScripts(ctx, p.c, calls, nil)
	close(b.done)
}

// coalesce sets up s's coalescing: a coalescer on a plain client, one per
// master on a Cluster client; spawn runs their batches.
func (s *deployment) coalesce(spawn func(func()) bool) {
	switch c := s.c.(type) {
	case *redis.Client:
		s.pipe = &coalescer{c: c, spawn: spawn}
	case *redis.ClusterClient:
		s.masters = &masterPipes{cc: c, spawn: spawn, mut: s.mut}
	}
}

// masterPipes are a Cluster client's coalescers, one per master as the
// client's slot map names it, so that a batch is one master's and a hung
// master holds up only its own keys' calls. Calls and batches go through the
// Cluster client, which follows redirects: a slot map out of date only
// splits a batch.
type masterPipes struct {
	cc     *redis.ClusterClient
	spawn  func(func()) bool
	queued func() // given to each coalescer (coalescer.queued)
	mut    *mutants
	by     sync.Map // master's address → its *coalescer
}

// pipe returns the coalescer of key's master, or nil (the call is sent
// alone) while the client has no slot map: loading one is the client's, on
// the call's own budget (see docs/internals.md, "The wait room").
func (m *masterPipes) pipe(key string) *coalescer {
	n, err := m.cc.MasterForKey(noLoad, key)
	if err != nil {
		return nil
	}
	addr := n.Options().Addr
	if m.mut.onePipe {
		addr = ""
	}
	p, ok := m.by.Load(addr)
	if !ok {
		via := redis.UniversalClient(m.cc)
		if m.mut.noRedirect {
			via = n // straight to the master the map names
		}
		p, _ = m.by.LoadOrStore(addr, &coalescer{c: via, spawn: m.spawn, queued: m.queued})
	}
	return p.(*coalescer)
}
