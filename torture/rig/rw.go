package rig

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// OpRW is the Op of a request for the read-write lock rwKey(name): a
// reader (Event.Read: Locker.RLock) or a writer (Locker.Lock of the same
// name). Its begin and call events carry N = 1 (a busy answer needs one
// hold), the hold, its writes, end and Unlock are logged as a lock's are,
// under that key, which is also the lock's name in Redis: read-write
// requests never share a name with plain lock requests.
const OpRW = "rw"

// rwPrefix starts the key (and the Redis name) of a read-write request.
const rwPrefix = "rw:"

// rwKey is the key of the read-write lock of name.
func rwKey(name string) string { return rwPrefix + name }

// isRW reports whether key is a read-write lock's (rwKey).
func isRW(key string) bool { return strings.HasPrefix(key, rwPrefix) }

// shared reports whether key's holds may stand side by side (a semaphore's
// permits, a read-write lock's readers): the one-holder rules of a lock
// leave them to semaphores and readWrite.
func shared(key string) bool { return isSem(key) || isRW(key) }

// rwStep is a read-write request on name: a reader (RLock) three times in
// four, else a writer (Lock), held as a lock is — written to with its
// fence while its context is live, then released. Under -lock naiverw (the
// control) a reader takes the read lock of another name, so excluding no
// writer.
func (a *actor) rwStep(ctx, stop context.Context, name, holder, op string, budget, ttl, wait, ctxEnds time.Duration) {
	w := a.w
	key, read := rwKey(name), a.rng.IntN(4) != 0
	if op == "trylock" {
		wait = core.NoWait // one attempt
	}
	t0 := now()
	begin := Event{Ev: "begin", Worker: a.name, Key: key, Holder: holder, Op: OpRW, Start: t0, TTL: int64(ttl), N: 1, Read: read}
	w.log.add(begin, true)
	ctx = context.WithValue(ctx, callKey{}, &begin)
	locker := w.lockerNow()
	var lease *core.Lease
	var err error
	switch {
	case read && w.cfg.Lock == LockNaiveRW:
		lease, err = locker.RLock(ctx, "naive:"+key, core.WithTTL(ttl), core.WithWait(wait))
	case read:
		lease, err = locker.RLock(ctx, key, core.WithTTL(ttl), core.WithWait(wait))
	default:
		lease, err = locker.Lock(ctx, key, core.WithTTL(ttl), core.WithWait(wait))
	}
	ev := Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: OpRW, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: result(err), Why: cause(err), Ends: t0 + int64(ctxEnds), N: 1, Read: read}
	if err != nil {
		w.log.add(ev, true)
		return
	}
	ev.Fence, ev.Res = lease.Fence(), ResAcquired
	w.log.add(ev, true)
	a.hold(stop, locker, lease, key, holder, ttl)
}

// readWrite judges the holds of every read-write lock (keys by rwKey):
//
//   - a writer alone: at each holder's first accepted write, no other
//     holder of the name that conflicts with it (a writer with anyone, a
//     reader with a writer) still believed it held it, the frozen and the
//     lost explained as for a semaphore's permits (RWBreaks);
//   - fences: as a semaphore's, over readers and writers alike (RWFences).
func (r *Report) readWrite(holds map[string]*holdSpan, frozen, stalls map[string][]interval, lossAt []interval) {
	byKey := map[string][]*holdSpan{}
	for _, h := range holds {
		if isRW(h.key) {
			byKey[h.key] = append(byKey[h.key], h)
		}
	}
	for key, hs := range byKey {
		sort.Slice(hs, func(i, j int) bool { return hs[i].acq < hs[j].acq })
		for _, y := range hs {
			if y.firstWrite == 0 {
				continue // nothing written under it: nothing to protect
			}
			r.RWJudged++
			with, explained := r.believers(y, hs, func(x *holdSpan) bool { return !x.read || !y.read }, frozen, stalls, lossAt)
			if y.read {
				readers, _ := r.believers(y, hs, func(x *holdSpan) bool { return x.read }, frozen, stalls, lossAt)
				r.RWReadersMax = max(r.RWReadersMax, 1+len(readers))
			}
			if len(with) > 0 {
				kind := "writer"
				if y.read {
					kind = "reader"
				}
				r.RWBreaks = append(r.RWBreaks, fmt.Sprintf("%s: %s %s (fence %d) wrote at %s while %s still believed (and %d more, explained)",
					key, kind, y.holder, y.fence, ts(y.firstWrite), strings.Join(with, ", "), explained))
			}
		}
		breaks, pairs := fenceOrder(key, hs, rwFenceWindow, lossAt)
		r.RWFences, r.RWFencePairs = append(r.RWFences, breaks...), r.RWFencePairs+pairs
	}
}

// rwFenceWindow is how many earlier holds (by return) the fence rule
// compares each hold of a read-write lock with.
const rwFenceWindow = 16
