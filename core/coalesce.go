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
// first of them sends the whole queue as one pipeline. Under concurrency
// that is one write and one read for many calls (as rueidis pipelines
// automatically) instead of a pooled connection and two system calls each.
// More than one slot keeps a connection that hangs (until the client's
// ReadTimeout) from holding up every call of the Locker.
//
// It is used only with clients that ignore context deadlines (go-redis's
// default): there a call is bounded by the caller's budget around it (see
// bounded), so waiting in the queue does not change what a caller is told.
// A pipelined call has go-redis's retry semantics (the whole pipeline is
// re-sent on a timeout), which the scripts are made for: each is safe to run
// twice.
type coalescer struct {
	c *redis.Client

	mu       sync.Mutex
	inFlight int // round trips in flight, at most coalesceSlots
	queue    []*queuedCall
}

const coalesceSlots = 4

// queuedCall is one script call waiting for a round trip.
type queuedCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{} // closed when cmd is answered, or to make this caller lead
	batch  []*queuedCall // set when this caller leads: the calls it sends
}

// run sends script (EVALSHA, falling back to EVAL when the server's script
// cache lacks it) and returns its answered command.
func (p *coalescer) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	p.mu.Lock()
	if p.inFlight < coalesceSlots {
		p.inFlight++
		p.mu.Unlock()
		cmd := script.Run(ctx, p.c, keys, args...)
		p.next()
		return cmd
	}
	q := &queuedCall{script: script, keys: keys, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, q)
	p.mu.Unlock()
	<-q.done
	if q.batch != nil {
		p.send(context.WithoutCancel(ctx), q.batch)
		p.next()
	}
	return q.cmd
}

// next hands a finished round trip's slot on: to the first queued caller
// with the whole queue, or to nobody.
func (p *coalescer) next() {
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.inFlight--
		p.mu.Unlock()
		return
	}
	batch := p.queue
	p.queue = nil
	p.mu.Unlock()
	batch[0].batch = batch
	close(batch[0].done)
}

// send runs batch as one pipeline (and once more with the scripts' source
// for the calls the server's script cache did not know), then answers
// every caller but the leader, who is answered by returning.
func (p *coalescer) send(ctx context.Context, batch []*queuedCall) {
	pipeline := func(calls []*queuedCall, sha bool) {
		_, _ = p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for _, q := range calls {
				if sha {
					q.cmd = q.script.EvalSha(ctx, pl, q.keys, q.args...)
				} else {
					q.cmd = q.script.Eval(ctx, pl, q.keys, q.args...)
				}
			}
			return nil
		})
	}
	pipeline(batch, true)
	var missing []*queuedCall
	for _, q := range batch {
		if err := q.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		pipeline(missing, false)
	}
	for _, q := range batch[1:] {
		close(q.done)
	}
}
