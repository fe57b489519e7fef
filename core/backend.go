package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// backend is the narrow seam between the Locker (waiting, leases, watchdog)
// and where the lock lives: today one Redis deployment (a master, a
// Sentinel failover client or a Cluster). Every operation is safe to run
// twice — go-redis re-sends a command whose reply came late — and has the
// effect of once with the same reply.
type backend interface {
	// acquire tries once for owner (ttl is in ms as a string, boxed once per
	// option set). entry is how long a waiting caller's queue entry lives
	// (ms as a string; "" for a single attempt, which never queues), seq the
	// number of its refresh. An answered acquire says what it found (see
	// acquireReply); an error is a call that failed. tag is the caller's
	// holder tag (nil when the Locker has no tag function: then nothing is
	// stored or answered).
	acquire(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag any) (acquireReply, error)
	// release gives up owner's hold, handing the lock to the first live
	// waiter, or owner's place in the queue: held reports whether owner
	// held the lock. With marker it leaves owner's done marker, so that a
	// copy of an acquire of owner still in flight does nothing when it
	// arrives, and a copy of this release reports held again: the caller
	// asks for it when a call of owner's may have run without its answer
	// (see once); a release after calls that were all answered needs none.
	release(ctx context.Context, k *lockKeys, owner ownerID, marker bool) (held bool, err error)
	// forceRelease is release by an operator (ForceRelease): held only if
	// owner holds the lock now (a copy of a release that already happened
	// does not count), and owner's own later release reports not held.
	forceRelease(ctx context.Context, k *lockKeys, owner string) (held bool, err error)
	// groups splits a renewal batch into parts that can be sent and
	// answered independently (one per Redis node); each part is a list of
	// indexes into batch.
	groups(ctx context.Context, batch []renewal) [][]int
	// splitsByNode reports whether groups splits renewals by node (a Cluster):
	// the watchdog then sends every part on a goroutine of its own, so that
	// a hung node holds up no renewal of another node's. Otherwise a batch
	// is one part, which the watchdog's sender waits for.
	splitsByNode() bool
	// renew extends batch[i] for every i in part (one round trip) and sets
	// batch[i].held / batch[i].err.
	renew(ctx context.Context, batch []renewal, part []int)
	// pttl returns the lock's remaining TTL if owner holds it, else ErrNotHeld.
	pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error)
	// inspect reads the lock's state without changing it (Inspect).
	inspect(ctx context.Context, k *lockKeys) (lockState, error)
	// scan calls fn with the keys of lock hashes matching glob, on every
	// node, until fn returns false (List).
	scan(ctx context.Context, glob string, fn func(key string) bool) error
	// queues reports whether waiters queue in Redis and are handed the lock
	// by a release (one deployment). Waiters that do not (Redlock's, whose
	// nodes could grant different waiters) are told the lock is free, take
	// turns within their Locker, and give back partial grants and retry
	// under a new owner after a random delay.
	queues() bool
	// replicaAck reports whether grants and renewals count only once replicas
	// acknowledged them (WithReplicaAck): a grant told by a message is then
	// claimed by an attempt, which waits for the replicas, and a lease lost
	// is given back, since renewals that were not acknowledged still
	// extended it on the master.
	replicaAck() bool
	// clients are the clients of the nodes the backend uses, named as
	// errors name them (Ping): one for a deployment, whose Cluster client
	// stands for its masters; one per Redlock node.
	clients() []namedClient
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
	// stray: Redlock, busy on a majority yet granted by some node: what
	// was granted is the caller's to give back
	stray bool
}

// found is the outcome of an answered acquire.
type found uint8

const (
	// foundBusy: another owner holds the lock, or live waiters are ahead
	// (a waiting caller is now queued).
	foundBusy found = iota
	// foundHeld: the owner holds the lock (taken now, by an earlier copy of
	// the call, or handed to it as a waiter).
	foundHeld
	// foundSplit: Redlock, granted by fewer nodes than a quorum, busy on
	// the others (wait and holder as for busy); what was granted is the
	// caller's to give back.
	foundSplit
	// foundEnded: the owner's hold or wait had already ended: a late copy
	// of a call that was undone.
	foundEnded
)

type renewal struct {
	keys   *lockKeys
	owner  *ownerID // the hold's
	ttl    time.Duration
	ttlArg any // ttl in ms as a string, boxed once per batch
	held   bool
	err    error
}

// deployment is the backend on one Redis deployment (a master, a Sentinel
// failover client or a Cluster).
type deployment struct {
	c       redis.UniversalClient
	scripts *scripts // the acquire and release scripts
	// the scripts' Locker-wide arguments, boxed once
	windowArg any // fence window, ms
	markerArg any // how long a done marker lives, ms
	// pipe coalesces concurrent acquires and releases (nil: each call is
	// sent on its own; see coalescer for when it is used)
	pipe *coalescer
	// WithReplicaAck: grants and renewals wait for ackN replicas
	ackN       int
	ackTimeout time.Duration
}

// node is where a call on key goes when it must share a round trip with a
// WAIT: the client, or on a Cluster the client of the key's master (WAIT
// names no key, so a cluster pipeline would send it anywhere).
func (s *deployment) node(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return s.c, nil
}

// acked sends script and WAIT ackN ackTimeout in one pipeline (the script
// again with its source if the server's cache lacked it) and returns the
// script's command and the number of replicas that acknowledged.
func (s *deployment) acked(ctx context.Context, script *script, key string, keys []any, args ...any) (*redis.Cmd, int64, error) {
	c, err := s.node(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	call := &scriptCall{script: script, cmd: script.cmd(ctx, keys, args).Cmd}
	var wait *redis.Cmd // the last pipeline's, which carried the script's run
	pipeScripts(ctx, c, []*scriptCall{call}, func(p redis.Pipeliner) { wait = s.wait(ctx, p) })
	n, err := wait.Int64()
	return call.cmd, n, err
}

// wait queues WAIT ackN ackTimeout on p.
func (s *deployment) wait(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	return p.Do(ctx, "wait", s.ackN, s.ackTimeout.Milliseconds())
}

// notReplicated is the error of a grant or renewal acknowledged by got of
// the ackN replicas asked for.
func (s *deployment) notReplicated(got int64) error {
	return fmt.Errorf("%w (%d of %d within %v)", ErrNotReplicated, got, s.ackN, s.ackTimeout)
}

// run sends script with keys and args for one acquire or release.
func (s *deployment) run(ctx context.Context, script *script, keys []any, args ...any) *redis.Cmd {
	q := script.cmd(ctx, keys, args)
	if s.pipe != nil {
		return s.pipe.run(ctx, script, q)
	}
	return script.send(ctx, s.c, q)
}

func (s *deployment) acquire(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag any) (acquireReply, error) {
	keys := k.script(owner)
	script, args := s.scripts.acquire, []any{owner.arg, ttl, s.windowArg, entry, seq, tag}
	switch {
	case k.semaphore():
		script, args = s.scripts.semAcquire, []any{owner.arg, ttl, s.windowArg, entry, seq, k.permitsArg, tag}
	case k.read:
		script = rlockAcquireScript
	}
	if tag == nil {
		args = args[:len(args)-1]
	}
	var cmd *redis.Cmd
	var acks int64
	var ackErr error
	if s.ackN > 0 {
		cmd, acks, ackErr = s.acked(ctx, script, k.hash(), keys, args...)
		if cmd == nil {
			return acquireReply{}, ackErr
		}
	} else {
		cmd = s.run(ctx, script, keys, args...)
	}
	if have, ok := otherPermits(cmd); ok {
		return acquireReply{}, &permitsError{want: k.permits, have: have}
	}
	v, holder, err := readAcquire(cmd)
	switch {
	case err == redis.Nil:
		return acquireReply{found: foundEnded}, nil
	case err != nil:
		return acquireReply{}, err
	case v > 0 && ackErr != nil:
		return acquireReply{}, ackErr // held, maybe: the caller undoes it
	case v > 0 && s.ackN > 0 && acks < int64(s.ackN):
		return acquireReply{}, s.notReplicated(acks)
	case v > 0:
		return acquireReply{found: foundHeld, fence: v}, nil
	}
	return acquireReply{found: foundBusy, wait: time.Duration(-v) * time.Millisecond, holder: holder}, nil
}

// readAcquire reads the acquire script's answer: a number, or (busy, asked
// with a tag) the number and the holder's tag.
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

func (s *deployment) release(ctx context.Context, k *lockKeys, owner ownerID, marker bool) (bool, error) {
	m := noMarker
	if marker {
		m = s.markerArg
	}
	release := s.scripts.release
	switch {
	case k.semaphore():
		release = semReleaseScript
	case k.read:
		release = rlockReleaseScript
	}
	n, err := s.run(ctx, release, k.script(owner), owner.arg, s.windowArg, m).Int64()
	return n == 0, err
}

func (s *deployment) queues() bool { return true }

func (s *deployment) replicaAck() bool { return s.ackN > 0 }

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

// groupBy splits idx into groups of equal key, in order of first
// appearance.
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

// noMarker is the release script's marker lifetime for a release that
// leaves no done marker.
var noMarker any = "0"

func (s *deployment) forceRelease(ctx context.Context, k *lockKeys, owner string) (bool, error) {
	n, err := s.scripts.release.run(ctx, s.c, k.script(k.owner(owner)), owner, s.windowArg, s.markerArg, "force").Int64()
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

// groups: a plain client (a master or a Sentinel failover client) is one
// node, so the batch is one part; on a Cluster leases are grouped by the
// node that serves their slot, so that a hung node delays only its own
// leases' renewals.
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

func (s *deployment) splitsByNode() bool {
	_, ok := s.c.(*redis.ClusterClient)
	return ok
}

// renew sends one part in one round trip. On a plain client it is one
// script call for all its leases; on a sharded client (Cluster, Ring) the
// keys of one script must share a slot, so leases are grouped by hash tag
// and the groups pipelined.
func (s *deployment) renew(ctx context.Context, batch []renewal, part []int) {
	// Indexes into batch, one script call each: one per renew script (a
	// lock's, or a permit's or reader's) and, sharded, per hash tag.
	_, plain := s.c.(*redis.Client)
	calls := groupBy(part, func(i int) string {
		tag := ""
		if !plain {
			tag = hashTag(batch[i].keys.hash())
		}
		if batch[i].keys.perOwner() {
			return "o" + tag
		}
		return "l" + tag
	})
	var pc redis.Cmdable = s.c
	var after func(redis.Pipeliner)
	var waits []*redis.Cmd // one per pipeline: each covers the scripts it ran
	if s.ackN > 0 {
		after = func(p redis.Pipeliner) { waits = append(waits, s.wait(ctx, p)) }
		c, err := s.node(ctx, batch[part[0]].keys.hash())
		if err != nil {
			for _, i := range part {
				batch[i].err = err
			}
			return
		}
		pc = c
	}
	sc := make([]*scriptCall, len(calls))
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
