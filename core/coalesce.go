package core

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// coalescer sends the acquire and release scripts of one Locker's callers
// to a plain client (a master or a Sentinel failover client) in at most
// coalesceSlots round trips at a time: a caller that finds a slot free sends
// its script at once, as it would alone (no added latency); callers that
// arrive while every slot is in flight queue, and when one is answered the
// whole queue goes as one pipeline, sent by a goroutine of the Locker. Under
// concurrency that is one write and one read for many calls (as rueidis
// pipelines automatically) instead of a pooled connection and two system
// calls each. More than one slot keeps a connection that hangs (until the
// client's ReadTimeout) from holding up every call of the Locker.
//
// A queued caller waits for its answer or for its context to end (then its
// call may still be sent: its caller treats it as a call whose reply was
// late, and undoes it — the scripts' done markers make an undo that reaches
// Redis first stop a late acquire). A pipeline of scripts is never re-sent
// by the client (see once): a failed one is its callers' to undo.
type coalescer struct {
	c     *redis.Client
	spawn func(func()) bool // runs a batch on a goroutine the Locker tracks; false once closed

	mu       sync.Mutex
	inFlight int // round trips in flight, at most coalesceSlots
	queue    []*queuedCall
}

const coalesceSlots = 4

// queuedCall is one script call waiting for a round trip.
type queuedCall struct {
	scriptCall
	done chan struct{} // closed when cmd is answered
}

// run sends q, a command of script (EVALSHA, falling back to EVAL when the
// server's script cache lacks it), and returns its answered command, or one
// failed with ctx's error if ctx ended while it waited in the queue.
func (p *coalescer) run(ctx context.Context, script *script, q once) *redis.Cmd {
	p.mu.Lock()
	if p.inFlight < coalesceSlots {
		p.inFlight++
		p.mu.Unlock()
		cmd := script.send(ctx, p.c, q)
		p.next(ctx)
		return cmd
	}
	qc := &queuedCall{scriptCall: scriptCall{script: script, cmd: q.Cmd}, done: make(chan struct{})}
	p.queue = append(p.queue, qc)
	p.mu.Unlock()
	select {
	case <-qc.done:
		return qc.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// take returns the queue, to be sent in the slot just answered, or nil
// after freeing the slot.
func (p *coalescer) take() []*queuedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.inFlight--
		return nil
	}
	batch := p.queue
	p.queue = nil
	return batch
}

// next hands the slot of a round trip just answered to the queue, if any:
// its batches are sent on a goroutine of the Locker (or here, once the
// Locker is closed), so the caller that was answered returns at once.
func (p *coalescer) next(ctx context.Context) {
	batch := p.take()
	if batch == nil {
		return
	}
	bctx := context.WithoutCancel(ctx)
	drain := func() {
		for b := batch; b != nil; b = p.take() {
			p.send(bctx, b)
		}
	}
	if !p.spawn(drain) {
		drain()
	}
}

// send runs batch as one pipeline (see pipeScripts), then answers its
// callers.
func (p *coalescer) send(ctx context.Context, batch []*queuedCall) {
	calls := make([]*scriptCall, len(batch))
	for i, q := range batch {
		calls[i] = &q.scriptCall
	}
	pipeScripts(ctx, p.c, calls, nil)
	for _, q := range batch {
		close(q.done)
	}
}
