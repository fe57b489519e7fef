package rig

import (
	"context"
	"time"
)

// naiveStep is a naive SET NX lock with a fixed expiry: SET key token NX
// PX ttl, retried every 10ms within the budget, and DEL to release — it
// deletes whatever lock is there, renews nothing and has no fence.
func (a *actor) naiveStep(ctx, stop context.Context, key, holder, op string, budget, ttl time.Duration) {
	w := a.w
	t0 := now()
	w.log.add(Event{Ev: "begin", Worker: a.name, Key: key, Holder: holder, Op: op, Start: t0, TTL: int64(ttl)}, true)
	deadline := time.Now().Add(budget)
	res := ResBusy
	for {
		ok, err := w.client.SetNX(ctx, "naive:"+key, holder, ttl).Result()
		if err != nil {
			res = result(err)
			if ctx.Err() == nil {
				res = ResUnavailable
			}
			break
		}
		if ok {
			res = ResAcquired
			break
		}
		if op == "trylock" || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev := Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: op, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: res}
	if res != ResAcquired {
		w.log.add(ev, true)
		return
	}
	w.log.add(ev, true)
	writes := 1 + a.rng.IntN(4)
	gap := time.Duration(a.rng.IntN(8)) * time.Millisecond
	if a.rng.Float64() < 0.1 {
		gap = time.Duration(float64(ttl)*(1.5+1.5*a.rng.Float64())) / time.Duration(writes)
	}
	for i := 0; i < writes && stop.Err() == nil; i++ {
		time.Sleep(gap)
		t := now()
		r := a.res.write(key, holder, 0, true)
		w.log.add(Event{Ev: "write", Worker: a.name, Key: key, Holder: holder, Start: t, End: now(), Live: true, Res: r}, true)
	}
	w.log.add(Event{Ev: "end", Worker: a.name, Key: key, Holder: holder, End: now(), Why: "unlock"}, true)
	w.client.Del(context.Background(), "naive:"+key)
}
