package rig

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// OpMulti is the Op of a request that takes several keys at once: its
// begin and call events name the keys comma-separated (in the order
// drawn), and its Unlock's call event too. Each key taken is a hold of its
// own in the log — its end and write events name the key and the part's
// holder, partHolder(holder, key) — so the checker judges every part as it
// judges a single Lock's hold, against the single holders of that key.
const OpMulti = "multi"

// partHolder names the part of multi request holder that holds key.
func partHolder(holder, key string) string { return holder + "@" + key }

// multiOf is the multi request a part's holder belongs to ("" for a
// single hold).
func multiOf(holder string) string {
	m, _, ok := strings.Cut(holder, "@")
	if !ok {
		return ""
	}
	return m
}

// heldSet is what a multi request holds: LockMulti's lease, or the
// loopmulti control's locks.
type heldSet interface {
	Context() context.Context
	Fence() int64
	Unlock(context.Context) error
}

// drawKeys draws one or two more keys for a multi request that drew
// first: 2–3 distinct keys, each drawn as a single request's is.
func (a *actor) drawKeys(first string) []string {
	keys := []string{first}
	for n := 2 + a.rng.IntN(2); len(keys) < min(n, a.w.cfg.Keys); {
		if k, _ := a.drawKey(); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// multiStep is a request that takes keys at once (LockMulti; the
// loopmulti control: a loop of Locks) and, while the lease's context is
// live, writes to every one of them in rounds with the lease's fence, then
// unlocks them all.
func (a *actor) multiStep(ctx, stop context.Context, keys []string, holder string, budget, ttl, wait, ctxEnds time.Duration) {
	w, rng := a.w, a.rng
	joined := strings.Join(keys, ",")
	t0 := now()
	begin := Event{Ev: "begin", Worker: a.name, Key: joined, Holder: holder, Op: OpMulti, Start: t0, TTL: int64(ttl)}
	w.log.add(begin, true)
	ctx = context.WithValue(ctx, callKey{}, &begin)
	opts := []core.LockOption{core.WithTTL(ttl), core.WithWait(wait)}
	var lease heldSet
	var err error
	if w.cfg.Lock == LockLoopMulti {
		lease, err = loopMulti(ctx, w.lockerNow(), keys, ttl, wait)
	} else {
		var l *core.Lease
		if l, err = w.lockerNow().LockMulti(ctx, keys, opts...); err == nil {
			lease = l
		}
	}
	ev := Event{Ev: "call", Worker: a.name, Key: joined, Holder: holder, Op: OpMulti, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: result(err), Why: cause(err), Ends: t0 + int64(ctxEnds)}
	if be := (*core.BusyError)(nil); errors.As(err, &be) {
		ev.Why = be.Key // the key that could not be taken
	}
	if err != nil {
		w.log.add(ev, true)
		return
	}
	fence := lease.Fence()
	ev.Fence, ev.Res = fence, ResAcquired
	w.log.add(ev, true)
	stopLost := context.AfterFunc(lease.Context(), func() {
		a.endParts(keys, holder, endWhy(lease.Context()))
	})
	defer stopLost()
	rounds := 1 + rng.IntN(4)
	gap := time.Duration(rng.IntN(8)) * time.Millisecond
	if rng.Float64() < 0.1 && ttl <= 2*time.Second {
		gap = time.Duration(float64(ttl)*(1.5+1.5*rng.Float64())) / time.Duration(rounds) // only renewals keep it
	}
rounds:
	for i := 0; i < rounds && stop.Err() == nil; i++ {
		time.Sleep(gap)
		for _, k := range keys {
			if !a.write(lease, k, partHolder(holder, k), fence) {
				break rounds
			}
		}
	}
	a.endParts(keys, holder, "unlock")
	t1 := now()
	err = lease.Unlock(context.Background())
	w.log.add(Event{Ev: "call", Worker: a.name, Key: joined, Holder: holder, Op: "unlock", Start: t1, End: now(), Budget: int64(core.DefaultReleaseTimeout), TTL: int64(ttl), Res: result(err), Why: cause(err)}, true)
}

// endParts logs the end of every part of a multi hold (the first end
// logged for a part is the one the checker takes).
func (a *actor) endParts(keys []string, holder, why string) {
	for _, k := range keys {
		a.w.log.add(Event{Ev: "end", Worker: a.name, Key: k, Holder: partHolder(holder, k), End: now(), Why: why}, true)
	}
}

// loopMulti is the loopmulti control: LockMulti written as a loop of
// Locks, in the order the keys were drawn (not sorted), within one wait
// budget, under a context that does not end with the request's (as a loop
// under context.Background() would), that returns the first error and
// keeps what it took: not given back, and renewed by its Locker until its
// worker dies. The checker, holding LockMulti to "all or none", finds the
// keys busy with no holder: deadlocks, and waiters stalled on a lock no
// one holds.
func loopMulti(ctx context.Context, l *core.Locker, keys []string, ttl, wait time.Duration) (heldSet, error) {
	ctx = context.WithoutCancel(ctx)
	until := time.Now().Add(wait)
	var parts []*core.Lease
	for _, k := range keys {
		w := wait
		if wait > 0 {
			if w = time.Until(until); w <= 0 {
				w = core.NoWait
			}
		}
		s, err := l.Lock(ctx, k, core.WithTTL(ttl), core.WithWait(w))
		if err != nil {
			return nil, err
		}
		parts = append(parts, s)
	}
	return newLoopLease(parts), nil
}

// loopLease is the control's lease of several locks: its context ends
// when any part's does, its fence is the highest, Unlock releases all.
type loopLease struct {
	parts  []*core.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newLoopLease(parts []*core.Lease) *loopLease {
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &loopLease{parts: parts, ctx: ctx, cancel: cancel}
	for _, p := range parts {
		context.AfterFunc(p.Context(), func() { cancel(context.Cause(p.Context())) })
	}
	return m
}

func (m *loopLease) Context() context.Context { return m.ctx }

func (m *loopLease) Fence() int64 {
	var f int64
	for _, p := range m.parts {
		f = max(f, p.Fence())
	}
	return f
}

func (m *loopLease) Unlock(ctx context.Context) error {
	m.cancel(context.Canceled)
	var errs []error
	for _, p := range m.parts {
		errs = append(errs, p.Unlock(ctx))
	}
	return errors.Join(errs...)
}
