package core

import (
	"context"
	"time"
)

// fanOut runs call on every node in parallel, each bounded by d (and by
// ctx), and returns the results of the nodes that answered in time; a node
// that did not has its error set to a timeout. A late answer is dropped:
// the scripts are safe to repeat and to undo, and an acquire's undo goes to
// every node (see attempt).
func fanOut[T any](ctx context.Context, r *redlock, d time.Duration, call func(ctx context.Context, i int, n *deployment) (T, error)) ([]T, []error) {
	return fanOutUntil(ctx, r, d, call, nil)
}

// verdict is what a fan-out's answers so far decide.
type verdict uint8

const (
	open     verdict = iota // wait for more answers
	decided                 // the outcome is known: return now
	settling                // known unless a slower answer changes it: return after fanOutGrace, or when every node answered
)

// fanOutGrace is how long a settling fan-out still waits for the nodes
// that have not answered: a healthy node answers within it, so its answer
// (a grant, say) is counted rather than left behind; a hung one delays the
// outcome no longer than that.
const fanOutGrace = 5 * time.Millisecond

// fanOutUntil is fanOut that returns as soon as judge, told of each answer
// as it comes, says the outcome is known (a majority granted), or
// fanOutGrace after it says it is settling: a node that hangs then delays
// nobody. The calls still in flight go on in the background within d (a
// healthy node gets the lock too); their nodes' errors stay a timeout.
func fanOutUntil[T any](ctx context.Context, r *redlock, d time.Duration, call func(ctx context.Context, i int, n *deployment) (T, error), judge func(v T, err error) verdict) ([]T, []error) {
	res := make([]T, len(r.nodes))
	errs := make([]error, len(r.nodes))
	if dl, ok := ctx.Deadline(); ok {
		// Return what answered a little before ctx ends, not at its end:
		// a caller bounded by the same instant (an attempt at the end of
		// its budget, with one node not answering) would otherwise race
		// the fan-out's own timeout and find no answer at all.
		d = max(min(d, time.Until(dl)-replyGrace/2), time.Millisecond)
	}
	base := ctx
	if judge != nil {
		base = context.WithoutCancel(ctx) // the calls outlive an early return
	}
	cctx, cancel := context.WithTimeout(base, d)
	early := false
	defer func() {
		if !early {
			cancel()
		}
	}()
	ch := make(chan nodeAnswer[T], len(r.nodes))
	pending := startAll(cctx, r, call, ch, errs)
	var grace <-chan time.Time
	for pending > 0 {
		select {
		case a := <-ch:
			res[a.i], errs[a.i] = a.v, a.err
			pending--
			if pending == 0 || judge == nil {
				continue
			}
			switch judge(a.v, a.err) {
			case decided:
				early = r.spawn(drain(ch, pending, cancel))
				pending = 0
			case settling:
				if grace == nil {
					t := time.NewTimer(fanOutGrace)
					defer t.Stop()
					grace = t.C
				}
			}
		case <-grace:
			early = r.spawn(drain(ch, pending, cancel))
			pending = 0
		case <-cctx.Done():
			pending = 0
		}
	}
	return res, errs
}

// nodeAnswer is node i's answer in a fan-out.
type nodeAnswer[T any] struct {
	i   int
	v   T
	err error
}

// startAll starts call on every node, on goroutines the Locker tracks,
// each answering on ch, and returns how many started. errs is set for
// every node: errNoAnswer until it answers, ErrClosed when the Locker is
// closed and the call never started.
func startAll[T any](ctx context.Context, r *redlock, call func(ctx context.Context, i int, n *deployment) (T, error), ch chan<- nodeAnswer[T], errs []error) int {
	started := 0
	for i, n := range r.nodes {
		errs[i] = errNoAnswer
		if r.spawn(func() {
			v, err := call(ctx, i, n)
			ch <- nodeAnswer[T]{i, v, err}
		}) {
			started++
		} else {
			errs[i] = ErrClosed
		}
	}
	return started
}

// drain returns a function that reads the left answers still to come on
// ch, then cancels their context: the calls of a fan-out decided early
// finish in the background.
func drain[A any](ch <-chan A, left int, cancel context.CancelFunc) func() {
	return func() {
		defer cancel()
		for ; left > 0; left-- {
			<-ch
		}
	}
}
