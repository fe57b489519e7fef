package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// backend is where the Locker's locks live: one Redis deployment
// (deployment) or Redlock's masters (redlock). Every operation is safe to
// run twice, with the effect and the reply of once. What its topology means
// for the Locker is its traits.
type backend interface {
	// acquire tries once for owner. ttl and entry (the queue entry's life; ""
	// for a single attempt, which never queues) are ms as strings, seq the
	// entry's refresh number, tag the holder tag or nil. An error means the call failed.
	acquire(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag any) (acquireReply, error)
	// release gives up owner's hold (handing it to the first live waiter) or
	// its place in the queue, and reports whether owner held it. It leaves
	// owner's done marker on the nodes m names: ask for it where a call of
	// owner may have run unanswered. See docs/design.md, "Redis layout".
	release(ctx context.Context, k *lockKeys, owner ownerID, m markers) (held bool, err error)
	// releaseLean releases owner's lean hold (taken with no one waiting and no
	// tag) with one HDEL, leaving no done marker: released reports whether it
	// was; if not (someone waits now, or it is gone), release tells which.
	// Redlock releases the nodes m names with release's markers instead; a
	// deployment's is asked for only with none. See docs/design.md, "Redis layout".
	releaseLean(ctx context.Context, k *lockKeys, owner ownerID, m markers) (released bool, err error)
	// groups splits a renewal batch into parts (indexes into batch) sent
	// and answered independently, one per Redis node.
	groups(ctx context.Context, batch []renewal) [][]int
	// renew extends batch[i] for each i in part in one round trip, setting its held and err.
	renew(ctx context.Context, batch []renewal, part []int)
	// pttl returns the lock's remaining TTL if owner holds it, else ErrNotHeld.
	pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error)
	// traits are what the backend's topology means for the Locker; fixed.
	traits() traits

	// The operators' calls (Inspect, ForceRelease, List, Ping):
	// forceRelease is ForceRelease's: held only if owner holds the lock now;
	// owner's own later release reports not held.
	forceRelease(ctx context.Context, k *lockKeys, owner string) (held bool, err error)
	// inspect reads the lock's state without changing it (Inspect).
	inspect(ctx context.Context, k *lockKeys) (lockState, error)
	// scan calls fn on each node's lock hash keys matching glob until fn returns false (List).
	scan(ctx context.Context, glob string, fn func(key string) bool) error
	// clients are the backend's clients, named as errors name them (Ping).
	clients() []namedClient
}

// traits are what a backend's topology means for the Locker's callers.
type traits struct {
	// queues: waiters queue in Redis and are handed the lock by a release.
	// Redlock's do not: they take turns within their Locker.
	queues bool
	// replicaAck: grants and renewals count only once replicas acknowledged
	// them (WithReplicaAck): grant messages are then claimed by an attempt,
	// and lost leases given back.
	replicaAck bool
	// splitsByNode: groups splits by node (a Cluster), so the watchdog sends
	// each part on a goroutine of its own.
	splitsByNode bool
}

// namedClient is a client of one node (or a Cluster) and its name.
type namedClient struct {
	name string
	c    redis.UniversalClient
}

// acquireReply is what an answered acquire found.
type acquireReply struct {
	found  found
	fence  int64         // held: the hold's fence
	wait   time.Duration // busy, split: the holder's remaining TTL, or what the live waiters ahead may take
	holder string        // busy, split: the holder's tag (when a tag was sent)
	// stray: Redlock, busy on a majority yet granted by a node: the caller gives it back
	stray bool
	// proposed: Redlock, held after proposing the fence: it may be the Locker's clock, not a server's
	proposed bool
	// unseen: Redlock, this attempt's node calls that may still run unseen
	// (not answered yet, or failed after they may have run): the owner's
	// releases leave done markers on their nodes (hold.markers)
	unseen *pending
}

// markers names the nodes a release leaves its owner's done marker on
// (bit i: node i; a deployment is one node): those where a call of the
// owner may still run unseen.
type markers uint32

const (
	noMarkers  markers = 0
	allMarkers markers = ^markers(0)
)

// node is m for node i alone: all markers or none.
func (m markers) node(i int) markers {
	if m&(1<<i) != 0 {
		return allMarkers
	}
	return noMarkers
}

// found is the outcome of an answered acquire.
type found uint8

const (
	// foundBusy: another owner holds it, or live waiters are ahead (a waiting caller is now queued).
	foundBusy found = iota
	// foundHeld: the owner holds it (taken now, by an earlier copy, or handed to it as a waiter).
	foundHeld
	// foundSplit: Redlock, granted by fewer than a quorum and busy elsewhere; the caller gives its grants back.
	foundSplit
	// foundEnded: the owner's hold or wait had already ended (a late copy of an undone call).
	foundEnded
)

// renewal is one lease's entry in a renewal batch.
type renewal struct {
	keys   *lockKeys
	owner  *ownerID // the hold's
	ttl    time.Duration
	ttlArg any // ttl in ms as a string, boxed once per batch
	held   bool
	err    error
	// unseen: Redlock, a re-take of it on a node that lost it may still run
	// (unanswered): its releases leave done markers
	unseen bool
}

// deployment is the backend on one Redis master, Sentinel or Cluster.
type deployment struct {
	c redis.UniversalClient
	// the scripts' Locker-wide arguments, boxed once
	windowArg any // fence window, ms
	markerArg any // done marker lifetime, ms
	// pipe coalesces acquires and releases on a plain client, masters on a
	// Cluster client (both nil: each call is sent alone)
	pipe    *coalescer
	masters *masterPipes
	// WithReplicaAck: grants and renewals wait for ackN replicas
	ackN       int
	ackTimeout time.Duration
	mut        *mutants
}

// node is where a call on key goes when it shares a round trip with a WAIT:
// on a Cluster the key's master, since WAIT names no key.
func (s *deployment) node(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return s.c, nil
}

// notReplicated is ErrNotReplicated for got acknowledgements of ackN.
func (s *deployment) notReplicated(got int64) error {
	return fmt.Errorf("%w (%d of %d within %v)", ErrNotReplicated, got, s.ackN, s.ackTimeout)
}

// run sends script with k's keys for owner and args, for one acquire or release.
func (s *deployment) run(ctx context.Context, script *script, k *lockKeys, owner ownerID, args ...any) *redis.Cmd {
	return s.send(ctx, script, k, script.cmd(ctx, k.script(owner), args))
}

// send sends q, a call of script on k (nil: a plain command), coalesced
// with other calls to k's node if the Locker coalesces.
func (s *deployment) send(ctx context.Context, script *script, k *lockKeys, q once) *redis.Cmd {
	if s.mut.cmdInfo {
		q.SetStepCount(0)
	}
	pipe := s.pipe
	if s.masters != nil {
		pipe = s.masters.pipe(k.hash())
	}
	if pipe != nil {
		return pipe.run(ctx, script, q)
	}
	return script.send(ctx, s.c, q)
}

func (s *deployment) acquire(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag any) (acquireReply, error) {
	return s.acquireLeast(ctx, k, owner, ttl, entry, seq, tag, nil)
}

// acquireLeast is acquire, issuing a lock's fence no lower than least (µs
// as a string; nil: no floor but the slot's): Redlock's proposal.
func (s *deployment) acquireLeast(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag, least any) (acquireReply, error) {
	script, args := s.mut.scripts.acquire, []any{owner.arg, ttl, s.windowArg, entry, seq, tag, least}
	switch {
	case k.semaphore():
		script, args = s.mut.scripts.semAcquire, []any{owner.arg, ttl, s.windowArg, entry, seq, k.permitsArg, tag}
	case k.read:
		script, args = rlockAcquireScript, args[:6]
	case least == nil:
		args = args[:6]
	case tag == nil:
		args[5] = "" // the least fence comes after the tag: none
	}
	if args[len(args)-1] == nil {
		args = args[:len(args)-1] // no tag
	}
	var cmd *redis.Cmd
	var acks int64
	var ackErr error
	if s.ackN > 0 {
		// The script and WAIT in one pipeline.
		c, err := s.node(ctx, k.hash())
		if err != nil {
			return acquireReply{}, s.failed(err)
		}
		call := &scriptCall{script: script, cmd: script.cmd(ctx, k.script(owner), args).Cmd}
		var wait *redis.Cmd // the last pipeline's, which carried the script's run
		pipeScripts(ctx, c, []*scriptCall{call}, func(p redis.Pipeliner) { wait = p.Do(ctx, "wait", s.ackN, s.ackTimeout.Milliseconds()) })
		cmd = call.cmd
		acks, ackErr = wait.Int64()
	} else {
		cmd = s.run(ctx, script, k, owner, args...)
	}
	// A refusal of the permits count stands whatever error go-redis set on
	// the command for a later reply of its pipeline (a WAIT, a coalesced call).
	if p, ok := cmd.Val().([]any); ok && len(p) == 2 && p[0] == "p" && (cmd.Err() == nil || !s.mut.permitsAfterErr) {
		have, _ := p[1].(int64)
		return acquireReply{}, &permitsError{want: k.permits, have: have}
	}
	v, holder, err := readAcquire(cmd)
	switch {
	case err == redis.Nil:
		return acquireReply{found: foundEnded}, nil
	case err != nil:
		return acquireReply{}, s.failed(err)
	case v > 0 && ackErr != nil:
		return acquireReply{}, ackErr // held, maybe: the caller undoes it
	case v > 0 && s.ackN > 0 && acks < int64(s.ackN):
		return acquireReply{}, s.notReplicated(acks)
	case v > 0:
		return acquireReply{found: foundHeld, fence: v}, nil
	}
	return acquireReply{found: foundBusy, wait: time.Duration(-v) * time.Millisecond, holder: holder}, nil
}

// failed returns err, after a failed dial on a Cluster client has made it
// read its slot map again: else it dials a dead master until its own 60s
// reload (mutant no-slot-reload).
func (s *deployment) failed(err error) error {
	if cc, ok := s.c.(*redis.ClusterClient); ok && dialFailed(err) && !s.mut.noSlotReload {
		cc.ReloadState(context.Background())
	}
	return err
}

// readAcquire reads the acquire script's number and, if busy, the holder's tag.
func readAcquire(cmd *redis.Cmd) (int64, string, error) {
	r, err := cmd.Result()
	if err != nil {
		return 0, "", err
	}
	switch r := r.(type) {
	case int64:
		return r, "", nil
	case []any:
		if len(r) == 2 {
			v, ok := r[0].(int64)
			tag, _ := r[1].(string)
			if ok {
				return v, tag, nil
			}
		}
	}
	return 0, "", fmt.Errorf("unexpected acquire reply %v", r)
}

// releaseLean: a lean hold is the hash's one field, named by its owner;
// deleting that field deletes the hash, and deletes nothing of another owner's.
func (s *deployment) releaseLean(ctx context.Context, k *lockKeys, owner ownerID, _ markers) (bool, error) {
	n, err := s.send(ctx, nil, k, newOnce(ctx, []any{"hdel", k.args[0], owner.arg})).Int64()
	return n == 1, err
}

func (s *deployment) release(ctx context.Context, k *lockKeys, owner ownerID, ms markers) (bool, error) {
	m := noMarker
	if ms != noMarkers {
		m = s.markerArg
	}
	release := s.mut.scripts.release
	switch {
	case k.semaphore():
		release = semReleaseScript
	case k.read:
		release = rlockReleaseScript
	}
	n, err := s.run(ctx, release, k, owner, owner.arg, s.windowArg, m).Int64()
	return n == 0, err
}

func (s *deployment) traits() traits {
	_, cluster := s.c.(*redis.ClusterClient)
	return traits{queues: true, replicaAck: s.ackN > 0, splitsByNode: cluster}
}

func (s *deployment) clients() []namedClient {
	name := "redis"
	switch c := s.c.(type) {
	case *redis.Client:
		name = c.Options().Addr
		if isFailoverClient(c) {
			name = "Sentinel master"
		}
	case *redis.ClusterClient:
		name = "cluster"
	}
	return []namedClient{{name, s.c}}
}

// groupBy splits idx into groups of equal key, in order of first appearance.
func groupBy(idx []int, key func(i int) string) [][]int {
	var groups [][]int
	at := map[string]int{}
	for _, i := range idx {
		k := key(i)
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// noMarker is the marker lifetime of a release that leaves no done marker.
var noMarker any = "0"

func (s *deployment) forceRelease(ctx context.Context, k *lockKeys, owner string) (bool, error) {
	o := ownerID{id: owner, arg: owner, marker: k.hash() + ":done:" + owner}
	n, err := s.mut.scripts.release.run(ctx, s.c, k.script(o), owner, s.windowArg, s.markerArg, "force").Int64()
	return n == 0, err
}

func (s *deployment) pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error) {
	sc := pttlScript
	if k.perOwner() {
		sc = semPTTLScript // a permit's or a reader's own expiry
	}
	n, err := sc.run(ctx, s.c, k.args[:1], owner).Int64()
	if err != nil {
		return 0, err
	}
	if n == -3 {
		return 0, ErrNotHeld
	}
	return time.Duration(max(n, 0)) * time.Millisecond, nil
}

// groups: one part on a plain client; on a Cluster one per master serving
// the leases' slots, so that a hung node delays only its own leases.
func (s *deployment) groups(ctx context.Context, batch []renewal) [][]int {
	all := make([]int, len(batch))
	for i := range all {
		all[i] = i
	}
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return [][]int{all}
	}
	return groupBy(all, func(i int) string {
		if n, err := cc.MasterForKey(ctx, batch[i].keys.hash()); err == nil {
			return n.Options().Addr
		}
		return ""
	})
}

// renewScripts makes part's script calls: one per renew script (a lock's, or
// a permit's or reader's) and, sharded, per hash tag (one script's keys share
// a slot); calls are their indexes into batch.
func renewScripts(ctx context.Context, batch []renewal, part []int, sharded bool) (calls [][]int, sc []*scriptCall) {
	calls = groupBy(part, func(i int) string {
		tag := ""
		if sharded {
			tag = hashTag(batch[i].keys.hash())
		}
		if batch[i].keys.perOwner() {
			return "o" + tag
		}
		return "l" + tag
	})
	sc = make([]*scriptCall, len(calls))
	for gi, g := range calls {
		keys := make([]any, len(g))
		args := make([]any, 0, 2*len(g))
		for j, i := range g {
			keys[j] = batch[i].keys.args[0]
			args = append(args, batch[i].owner.arg, batch[i].ttlArg)
		}
		renew := renewScript
		if batch[g[0]].keys.perOwner() {
			renew = semRenewScript
		}
		sc[gi] = &scriptCall{script: renew, cmd: renew.cmd(ctx, keys, args).Cmd}
	}
	return calls, sc
}

// renew sends one part in one round trip.
func (s *deployment) renew(ctx context.Context, batch []renewal, part []int) {
	_, plain := s.c.(*redis.Client)
	calls, sc := renewScripts(ctx, batch, part, !plain)
	var pc redis.Cmdable = s.c
	var after func(redis.Pipeliner)
	var waits []*redis.Cmd // one per pipeline: each covers the scripts it ran
	if s.ackN > 0 {
		after = func(p redis.Pipeliner) { waits = append(waits, p.Do(ctx, "wait", s.ackN, s.ackTimeout.Milliseconds())) }
		c, err := s.node(ctx, batch[part[0]].keys.hash())
		if err != nil {
			for _, i := range part {
				batch[i].err = err
			}
			return
		}
		pc = c
	}
	pipeScripts(ctx, pc, sc, after)
	var ackErr error
	for _, w := range waits {
		if n, err := w.Int64(); err != nil {
			ackErr = err
		} else if n < int64(s.ackN) && ackErr == nil {
			ackErr = s.notReplicated(n)
		}
	}
	for gi, q := range sc {
		held, err := q.cmd.Int64Slice()
		if err == nil && len(held) != len(calls[gi]) {
			err = errors.New("unexpected renew reply")
		}
		if err == nil && ackErr != nil {
			err = ackErr // not acknowledged: it does not count
		}
		for j, i := range calls[gi] {
			batch[i].err = err
			batch[i].held = err == nil && held[j] == 1
		}
	}
}
