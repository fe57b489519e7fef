package core

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// replyGrace is how long a call past its budget (or cancelled) still waits for
// a reply on its way, so a healthy Redis a moment late is not "unavailable".
const replyGrace = 50 * time.Millisecond

// errNoAnswer: Redis did not answer within the caller's budget (plus
// replyGrace); wrapped in ErrUnavailable by the callers.
var errNoAnswer = errors.New("no answer within the call's budget")

// bounded runs call so that the caller waits at most until deadline (zero:
// none) or ctx's end, plus replyGrace; call's ctx keeps ctx's values, not its
// cancellation. A late answer goes to orphan (nil: nothing to undo). Errors:
// call's own, errNoAnswer, ErrClosed; a call returns neither of the last two
// itself (Ping's stub for an unreachable Cluster, where it means the same,
// aside). See docs/internals.md, "Bounded calls".
func bounded[T any](l *Locker, ctx context.Context, deadline time.Time, call func(context.Context) (T, error), orphan func(T, error)) (T, error) {
	return boundedProbed(l, ctx, deadline, true, call, orphan)
}

// boundedProbed is bounded, probing the server (reach.go) only if probing.
// See docs/internals.md, "Bounded calls" (no probe for a waiting Lock on a
// client that follows failovers).
func boundedProbed[T any](l *Locker, ctx context.Context, deadline time.Time, probing bool, call func(context.Context) (T, error), orphan func(T, error)) (T, error) {
	var zero T
	if deadline.IsZero() && (ctx.Done() == nil || l.ctxDeadlines) {
		return call(ctx) // nothing but the client's timeouts can bound it
	}
	base := detached(ctx)
	probing = probing && l.prober.watches()
	if l.ctxDeadlines && !probing && !deadline.IsZero() {
		// Nothing cancels the call: a shared deadline will do (deadline.go).
		if cctx, ok := callDeadlines.ctx(base, deadline.Add(replyGrace)); ok {
			return call(cctx)
		}
	}
	var cctx context.Context
	var cancel context.CancelFunc
	if deadline.IsZero() {
		cctx, cancel = context.WithCancel(base)
	} else {
		cctx, cancel = context.WithDeadline(base, deadline.Add(replyGrace))
	}
	defer cancel()
	var refused chan error // a probe's failed dial (see reach.go)
	if probing {
		refused = make(chan error, 1)
		probe := time.AfterFunc(probeAfter, func() {
			l.goBackground(func() {
				if err := l.prober.refused(cctx, l.goBackground); err != nil {
					refused <- err
					cancel()
				}
			})
		})
		defer probe.Stop()
	}
	if l.ctxDeadlines {
		v, err := call(cctx)
		select {
		case perr := <-refused:
			if err != nil && !dialFailed(err) {
				return v, perr // stopped by the probe: it may have run
			}
		default:
		}
		return v, err
	}
	f := &flight[T]{done: make(chan struct{})}
	if !l.goBackground(func() {
		f.res, f.err = call(cctx)
		if !f.taken.CompareAndSwap(false, true) && orphan != nil { // given up
			orphan(f.res, f.err)
		}
		close(f.done)
	}) {
		return zero, ErrClosed
	}
	return f.wait(ctx, cctx, deadline, refused)
}

// detached is ctx without its cancellation; ctx itself when it is never
// cancelled, which spares an allocation.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// wait waits for the flight's answer until cctx ends, ctx is cancelled (then
// replyGrace more at most) or a probe reports a refused dial (refused).
func (f *flight[T]) wait(ctx, cctx context.Context, deadline time.Time, refused <-chan error) (T, error) {
	var zero T
	stop, done := cctx.Done(), ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case <-f.done:
			return f.res, f.err
		case perr := <-refused:
			if res, err, ok := f.giveUp(); ok && (err == nil || dialFailed(err)) {
				return res, err
			}
			return zero, perr
		case <-stop:
		case <-grace:
		case <-done:
			done = nil
			if deadline.IsZero() || time.Until(deadline) > 0 {
				// Cancelled before the deadline: replyGrace more at most.
				t := time.NewTimer(replyGrace)
				defer t.Stop()
				grace = t.C
			}
			continue
		}
		if res, err, ok := f.giveUp(); ok {
			return res, err
		}
		return zero, errNoAnswer
	}
}

// flight is one call to Redis on a goroutine of the Locker (Close waits for
// it), which its caller may stop waiting for; a late result goes to orphan
// (if not nil), which undoes the call. See docs/internals.md, "Bounded calls".
type flight[T any] struct {
	done chan struct{}
	res  T
	err  error
	// taken: the result was delivered (by the call) or orphaned (by giveUp), whichever came first
	taken atomic.Bool
}

// giveUp stops waiting: the result goes to orphan, unless it has just
// arrived, in which case it is returned with ok true.
func (f *flight[T]) giveUp() (res T, err error, ok bool) {
	if f.taken.CompareAndSwap(false, true) {
		return res, nil, false
	}
	<-f.done // delivered meanwhile
	return f.res, f.err, true
}
