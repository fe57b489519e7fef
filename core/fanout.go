package core

import (
	"context"
	"time"
)

// verdict is what a fan-out's answers so far decide.
type verdict uint8

const (
	open     verdict = iota // wait for more answers
	decided                 // the outcome is known: return now
	settling                // known unless a slower answer changes it: return after fanOutGrace
)

// fanOutGrace is how long a settling fan-out still waits: a healthy node's
// answer (a grant, say) is counted, a hung one delays no longer.
const fanOutGrace = 5 * time.Millisecond

// fanOutUntil runs call on every node in parallel, each bounded by d and ctx
// (unanswered: errNoAnswer; not started, the Locker closing: ErrClosed),
// until judge (nil: none), told of each answer, says decided, or for
// fanOutGrace after settling. With a judge the calls ignore ctx's
// cancellation and go on within d after an early return. See docs/internals.md, "Redlock (`redlock.go`, `redlock_wait.go`)".
func fanOutUntil[T any](ctx context.Context, r *redlock, d time.Duration, call func(ctx context.Context, i int, n *deployment) (T, error), judge func(v T, err error) verdict) ([]T, []error) {
	res := make([]T, len(r.nodes))
	errs := make([]error, len(r.nodes))
	if dl, ok := ctx.Deadline(); ok {
		// End a little before ctx, or a caller bounded by the same instant
		// races this timeout and finds no answer at all.
		d = max(min(d, time.Until(dl)-replyGrace/2), time.Millisecond)
	}
	base := ctx
	if judge != nil {
		base = context.WithoutCancel(ctx) // the calls outlive an early return
	}
	cctx, cancel := context.WithTimeout(base, d)
	ch := make(chan nodeAnswer[T], len(r.nodes))
	pending := 0 // calls started and not answered yet
	for i, n := range r.nodes {
		errs[i] = errNoAnswer
		if !r.l.goBackground(func() {
			v, err := call(cctx, i, n)
			ch <- nodeAnswer[T]{i, v, err}
		}) {
			errs[i] = ErrClosed
			continue
		}
		pending++
	}
	var grace <-chan time.Time
loop:
	for pending > 0 {
		select {
		case a := <-ch:
			res[a.i], errs[a.i] = a.v, a.err
			if pending--; judge == nil {
				continue
			}
			switch v := judge(a.v, a.err); {
			case v == decided:
				break loop
			case v == settling && grace == nil && pending > 0:
				t := time.NewTimer(fanOutGrace)
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			break loop
		case <-cctx.Done():
			pending = 0
		}
	}
	// Decided early: read the answers still due, then cancel the calls.
	if left := pending; left == 0 || !r.l.goBackground(func() {
		for range left {
			<-ch
		}
		cancel()
	}) {
		cancel()
	}
	return res, errs
}

// nodeAnswer is node i's answer in a fan-out.
type nodeAnswer[T any] struct {
	i   int
	v   T
	err error
}
