package core

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// coalescer sends a Locker's acquires and releases to a plain client in at
// most coalesceSlots round trips at once; later calls queue as one pipeline.
// A queued call may still be sent after its caller gave up: the caller undoes it.
// See docs/internals.md, "Coalescing".
type coalescer struct {
	c     *redis.Client
	spawn func(func()) bool // runs a batch on a goroutine the Locker tracks; false once closed

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

// send runs b as one pipeline (see pipeScripts), then answers its callers.
func (p *coalescer) send(ctx context.Context, b *batch) {
	calls := make([]*scriptCall, len(b.calls))
	for i := range b.calls {
		calls[i] = &b.calls[i]
	}
	pipeScripts(ctx, p.c, calls, nil)
	close(b.done)
}
