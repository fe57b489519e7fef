package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeError is one node's failure in a call (a Redlock node, or a node Ping
// reached); errors.As finds one per silent node in an ErrUnavailable error.
type NodeError struct {
	Node string // the node's address, or "node <i>" when the client names none
	Err  error
}

func (e *NodeError) Error() string { return "lockgate: node " + e.Node + ": " + e.Err.Error() }
func (e *NodeError) Unwrap() error { return e.Err }

// redlock is the backend over N independent masters: every call goes to
// all of them in parallel and counts when a majority (quorum) agrees.
type redlock struct {
	nodes  []*deployment
	names  []string
	quorum int
	// l runs node calls on its goroutines (goBackground: Close waits for them)
	l *Locker
	// lead: how far ahead of this host's clock a lock's proposed fence is (proposalLead)
	lead time.Duration
}

// perNode is the per-node timeout for a lock of ttl: 1% of it, 50ms to 1s.
func perNode(ttl time.Duration) time.Duration {
	return min(max(ttl/100, 50*time.Millisecond), time.Second)
}

// unavailableNodes joins the failed nodes' errors, each a *NodeError. If a
// node answered (ran: it ran there) or a failed call may have run, the call
// may have run: never neverRan, whatever other nodes' dials said.
func (r *redlock) unavailableNodes(errs []error, ran bool) error {
	var es []error
	for i, err := range errs {
		if err != nil {
			es = append(es, &NodeError{Node: r.names[i], Err: err})
		}
	}
	return r.joinNodes(es, ran)
}

// joinNodes joins the *NodeErrors es, marked ranOnNodes when ran or when one
// of them may have run.
func (r *redlock) joinNodes(es []error, ran bool) error {
	for _, err := range es {
		ran = ran || !neverRan(err)
	}
	if ran && !r.l.mut.dialNeverRan {
		return &ranOnNodes{errors.Join(es...)}
	}
	return errors.Join(es...)
}

// ranOnNodes is a Redlock call's failure after it may have run on a node.
type ranOnNodes struct{ error }

func (e *ranOnNodes) Unwrap() error { return e.error }

func (r *redlock) acquire(ctx context.Context, k *lockKeys, owner ownerID, ttl, entry any, seq int, tag any) (acquireReply, error) {
	ttlD := ttlOf(ttl)
	if e, _ := entry.(string); e != "" {
		entry = "n" // Redlock waiters do not queue: they are told when the lock is free
	}
	// A lock's first attempt under this owner proposes a fence (proposalLead):
	// no node can answer it with a fence of an earlier attempt's grant.
	var least any
	if !k.semaphore() && !k.read && seq <= 1 {
		least = strconv.FormatInt(time.Now().Add(r.lead).UnixMicro(), 10)
	}
	// Each node's answer, even after the majority decided, is noted.
	unseen := newPending(len(r.nodes))
	res, errs := fanOutUntil(ctx, r, perNode(ttlD), func(cctx context.Context, i int, n *deployment) (acquireReply, error) {
		a, err := n.acquireLeast(cctx, k, owner, ttl, entry, seq, tag, least)
		if err == nil || neverRan(err) {
			unseen.seen(i)
		}
		return a, err
	}, r.acquireJudge())
	t := tallyAcquires(res, errs)
	switch {
	case t.ended > 0:
		return acquireReply{found: foundEnded}, nil
	case t.granted >= r.quorum:
		if (least == nil || t.atFence < r.quorum) && !r.l.mut.skipRaise {
			if err := r.raiseFences(ctx, k, owner, t.fence, ttlD); err != nil {
				return acquireReply{}, err
			}
		}
		return acquireReply{found: foundHeld, fence: t.fence, proposed: least != nil, unseen: unseen}, nil
	case t.answered >= r.quorum && t.granted > 0 && t.answered-t.granted >= r.quorum && !r.l.mut.retryStray:
		// Busy on a majority, granted by a node that lost the holder's copy.
		return acquireReply{found: foundBusy, wait: t.wait, holder: t.holder, stray: true, unseen: unseen}, nil
	case t.answered >= r.quorum && t.granted > 0:
		// Granted by too few, no majority busy either: owners raced.
		return acquireReply{found: foundSplit, wait: t.wait, holder: t.holder, unseen: unseen}, nil
	case t.answered >= r.quorum:
		return acquireReply{found: foundBusy, wait: t.wait, holder: t.holder, unseen: unseen}, nil
	}
	return acquireReply{}, r.unavailableNodes(errs, t.granted > 0)
}

// maxRedlockNodes bounds a Redlock's masters: a node set (markers, pending)
// has a bit for each.
const maxRedlockNodes = 31

// pending is one Redlock attempt's node calls that may still run unseen:
// node i's may, until it answered or failed before it ran.
type pending struct {
	answered atomic.Uint32 // bit i: node i's call answered, or never ran
	all      uint32        // a bit for each node
}

func newPending(nodes int) *pending { return &pending{all: 1<<nodes - 1} }

// seen notes node i's call answered, or failed before it ran.
func (p *pending) seen(i int) { p.answered.Or(1 << i) }

// unseen names the nodes whose call may still run (none: every one answered).
func (p *pending) unseen() markers { return markers(p.all &^ p.answered.Load()) }

// acquireTally is what the nodes that answered an acquire in time said.
type acquireTally struct {
	answered, granted, ended int
	fence                    int64         // the largest granted
	atFence                  int           // grants of fence: a quorum's means their floors are fence already
	wait                     time.Duration // the shortest busy wait
	holder                   string        // a busy node's holder tag
}

func tallyAcquires(res []acquireReply, errs []error) acquireTally {
	var t acquireTally
	for i, a := range res {
		if errs[i] != nil {
			continue
		}
		t.answered++
		switch a.found {
		case foundEnded:
			t.ended++
		case foundHeld:
			t.granted++
			switch {
			case a.fence > t.fence:
				t.fence, t.atFence = a.fence, 1
			case a.fence == t.fence:
				t.atFence++
			}
		default:
			if t.wait == 0 || a.wait < t.wait {
				t.wait = a.wait
			}
			t.holder = cmp.Or(t.holder, a.holder)
		}
	}
	return t
}

// acquireJudge judges an acquire's fan-out: a quorum of grants decides it,
// refusals that leave no quorum of grants possible settle it. See
// docs/internals.md, "Redlock (`redlock.go`, `redlock_wait.go`)".
func (r *redlock) acquireJudge() func(acquireReply, error) verdict {
	grants, refusals := 0, 0
	return func(a acquireReply, err error) verdict {
		switch {
		case err != nil:
		case a.found == foundHeld:
			grants++
		case a.found == foundEnded:
			return decided
		default:
			refusals++
		}
		switch {
		case grants >= r.quorum:
			return decided
		case refusals > len(r.nodes)-r.quorum:
			return settling
		}
		return open
	}
}

// proposalLead is how far ahead of this host's clock a Redlock's proposed
// fence is: nodes whose clocks are behind it issue it as their fence, the
// same on each, so their fence floors need no raising (a node counts a
// proposal at most 100ms ahead of its own clock: acquire.lua).
const proposalLead = 10 * time.Millisecond

// raiseFences makes fence the fence floor on a quorum of nodes (any quorum),
// so that the next holder's fence is above it.
// See docs/internals.md, "Redlock (`redlock.go`, `redlock_wait.go`)".
func (r *redlock) raiseFences(ctx context.Context, k *lockKeys, owner ownerID, fence int64, ttl time.Duration) error {
	arg := strconv.FormatInt(fence, 10)
	confirmed := 0
	_, errs := fanOutUntil(ctx, r, perNode(ttl), func(cctx context.Context, i int, n *deployment) (struct{}, error) {
		return struct{}{}, fenceScript.run(cctx, n.c, []any{k.args[1], k.args[0]}, arg, n.windowArg, owner.arg).Err()
	}, func(_ struct{}, err error) verdict {
		if err == nil {
			confirmed++
		}
		if confirmed >= r.quorum {
			return decided
		}
		return open
	})
	if confirmed < r.quorum {
		return r.unavailableNodes(errs, true) // a majority granted before
	}
	return nil
}

// traits: Redlock's waiters do not queue (grants on independent nodes could
// go to different waiters), and a batch is one part, sent to every node at once.
func (r *redlock) traits() traits {
	return traits{replicaAck: r.nodes[0].traits().replicaAck}
}

func (r *redlock) clients() []namedClient {
	cs := make([]namedClient, len(r.nodes))
	for i, n := range r.nodes {
		cs[i] = namedClient{r.names[i], n.c}
	}
	return cs
}

// answers runs call on every node: the answers, or unavailableNodes below a quorum.
func answers[T any](ctx context.Context, r *redlock, call func(ctx context.Context, i int, n *deployment) (T, error)) ([]T, error) {
	res, errs := fanOutUntil(ctx, r, perNode(r.l.opts.call.ttl), call, nil) // no TTL named: the default's
	var got []T
	for i := range res {
		if errs[i] == nil {
			got = append(got, res[i])
		}
	}
	if len(got) < r.quorum {
		// Too few to tell: unavailable, so that an undo tries again.
		return nil, r.unavailableNodes(errs, len(got) > 0)
	}
	return got, nil
}

// release releases on every node: held when any node held owner's hold.
// m: see backend.release (an acquire decided by a majority may still run
// unseen on the other nodes: acquireReply.unseen).
func (r *redlock) release(ctx context.Context, k *lockKeys, owner ownerID, m markers) (bool, error) {
	held, err := answers(ctx, r, func(cctx context.Context, i int, n *deployment) (bool, error) {
		return n.release(cctx, k, owner, m.node(i))
	})
	return slices.Contains(held, true), err
}

// releaseLean releases a lean hold: on each node that m does not name the
// lean hold's HDEL, or where that finds none (a waiter flagged the lock, or
// the node did not grant it) the release script, without done markers; on
// the nodes m names (their acquire may still run) the script with markers.
func (r *redlock) releaseLean(ctx context.Context, k *lockKeys, owner ownerID, m markers) (bool, error) {
	held, err := answers(ctx, r, func(cctx context.Context, i int, n *deployment) (bool, error) {
		if mi := m.node(i); mi != noMarkers {
			return n.release(cctx, k, owner, mi)
		}
		if ok, err := n.releaseLean(cctx, k, owner, noMarkers); ok || err != nil {
			return ok, err
		}
		return n.release(cctx, k, owner, noMarkers)
	})
	return slices.Contains(held, true), err
}

// forceRelease: held when a quorum of nodes held owner's hold and removed it.
func (r *redlock) forceRelease(ctx context.Context, k *lockKeys, owner string) (bool, error) {
	removed, err := answers(ctx, r, func(cctx context.Context, _ int, n *deployment) (bool, error) {
		return n.forceRelease(cctx, k, owner)
	})
	n := 0
	for _, ok := range removed {
		if ok {
			n++
		}
	}
	return n >= r.quorum, err
}

// groups: one part, as a plain client's (NewRedlock takes only those).
func (r *redlock) groups(ctx context.Context, batch []renewal) [][]int {
	return r.nodes[0].groups(ctx, batch)
}

// renew renews on every node and returns once a quorum holds every lease of
// part; nodes that lost a lease a quorum holds get it back.
// See docs/internals.md, "Redlock (`redlock.go`, `redlock_wait.go`)".
func (r *redlock) renew(ctx context.Context, batch []renewal, part []int) {
	var ttl time.Duration
	for _, i := range part {
		ttl = max(ttl, batch[i].ttl)
	}
	// Each node gets a quarter of the TTL: only the lease's validity waits.
	d := max(perNode(ttl), ttl/4)
	// Each node fills its own copy: a late one may still write after return.
	per := make([][]renewal, len(r.nodes))
	for ni := range per {
		per[ni] = slices.Clone(batch)
	}
	holders := make(map[int]int, len(part)) // lease → nodes that hold it, so far
	left := len(part)                       // leases not yet held by a quorum
	_, errs := fanOutUntil(ctx, r, d, func(cctx context.Context, i int, n *deployment) (int, error) {
		n.renew(cctx, per[i], part)
		return i, nil
	}, func(ni int, _ error) verdict {
		for _, i := range part {
			if per[ni][i].err == nil && per[ni][i].held {
				if holders[i]++; holders[i] == r.quorum {
					left--
				}
			}
		}
		if left == 0 {
			return decided
		}
		return open
	})
	// Re-takes share one per-node timeout (the renewal is recorded only once
	// they end), and a node that left one unanswered gets no more.
	until, hung := time.Now().Add(perNode(ttl)), make([]bool, len(r.nodes))
	if r.l.mut.unboundedRetake {
		until = time.Time{} // none but the client's
	}
	for _, i := range part {
		r.judgeRenewal(ctx, batch, per, errs, i, until, hung)
	}
}

// judgeRenewal sets batch[i]'s outcome: held on a quorum (restoring it on
// nodes without it, by until and not on a node hung by an earlier re-take),
// not held if a quorum answered, else the nodes' errors.
func (r *redlock) judgeRenewal(ctx context.Context, batch []renewal, per [][]renewal, errs []error, i int, until time.Time, hung []bool) {
	held, answered := 0, 0
	var nerrs []error
	for ni := range r.nodes {
		if errs[ni] != nil {
			nerrs = append(nerrs, &NodeError{Node: r.names[ni], Err: errNoAnswer})
			continue
		}
		if err := per[ni][i].err; err != nil {
			nerrs = append(nerrs, &NodeError{Node: r.names[ni], Err: err})
			continue
		}
		answered++
		if per[ni][i].held {
			held++
		}
	}
	switch {
	case held >= r.quorum:
		batch[i].held, batch[i].err = true, nil
		for ni := range r.nodes {
			if errs[ni] == nil && per[ni][i].err == nil && !per[ni][i].held && !hung[ni] && (until.IsZero() || time.Now().Before(until)) {
				// Re-take it there for the same owner, best effort.
				_, err := bounded(r.l, ctx, until, func(cctx context.Context) (acquireReply, error) {
					return r.nodes[ni].acquire(cctx, batch[i].keys, *batch[i].owner, batch[i].ttlArg, noEntry, 0, nil)
				}, nil)
				if err != nil && !neverRan(err) {
					batch[i].unseen, hung[ni] = true, true
				}
			}
		}
	case answered >= r.quorum: // a majority answered, too few hold it
		batch[i].held, batch[i].err = false, nil
	default:
		batch[i].held, batch[i].err = false, r.joinNodes(nerrs, held > 0)
	}
}

func (r *redlock) pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error) {
	res, err := answers(ctx, r, func(cctx context.Context, _ int, n *deployment) (time.Duration, error) {
		d, err := n.pttl(cctx, k, owner)
		if errors.Is(err, ErrNotHeld) {
			return -1, nil // an answer: not held there
		}
		return d, err
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(res)
	slices.Reverse(res)
	if len(res) < r.quorum || res[r.quorum-1] < 0 {
		return 0, ErrNotHeld
	}
	return res[r.quorum-1], nil // what a quorum still holds
}

// ttlOf reads a TTL script argument (ms as a string).
func ttlOf(ttl any) time.Duration {
	s, _ := ttl.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond
}

// NewRedlock returns a Locker over N independent masters (Redlock): N odd,
// 3 to 31, each a plain or Sentinel failover client of its own master; opts
// are New's. Each node call is bounded by 1% of the TTL (50ms to 1s). Locks
// and renewals need a majority; fences increase while a majority keeps its
// data. Lock returns ErrNotObtained when busy on a majority, ErrUnavailable
// joined with a *NodeError per silent node when too few answer.
// See docs/topologies.md, "Redlock".
//
// Errors: ErrInvalid for fewer than three clients or more than 31, an even
// number, a nil one, a Cluster client, or two on the same address.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	if len(clients) < 3 || len(clients) > maxRedlockNodes || len(clients)%2 == 0 {
		return nil, invalidf("redlock needs an odd number of 3 to %d masters, got %d", maxRedlockNodes, len(clients))
	}
	seen := map[string]bool{}
	names := make([]string, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, invalidf("redlock client %d is nil", i)
		}
		pc, ok := c.(*redis.Client)
		if !ok {
			return nil, invalidf("redlock client %d is a %T: each must be one master (a plain or a Sentinel failover client)", i, c)
		}
		addr := pc.Options().Addr
		names[i] = addr
		if addr == "" || addr == "FailoverClient" {
			names[i] = fmt.Sprintf("node %d", i)
			continue
		}
		if seen[addr] {
			return nil, invalidf("redlock clients %s twice: the masters must be independent", addr)
		}
		seen[addr] = true
	}
	l, err := New(clients[0], opts...)
	if err != nil {
		return nil, err
	}
	r := &redlock{l: l, names: names, quorum: len(clients)/2 + 1, lead: proposalLead}
	l.waitRooms = nil
	for _, c := range clients {
		r.nodes = append(r.nodes, &deployment{c: c, windowArg: ms(l.opts.fenceWindow), markerArg: ms(markerTTL(c)), ackN: l.opts.ackN, ackTimeout: l.opts.ackTimeout, mut: &l.mut})
		l.waitRooms = append(l.waitRooms, newWaitRoom(c, l.clock, &l.mut))
		l.markerTTL = max(l.markerTTL, markerTTL(c))
		l.ctxDeadlines = l.ctxDeadlines && honoursDeadlines(c, &l.mut)
	}
	l.be = r
	l.prober = &prober{} // one node refusing says nothing of a quorum
	return l, nil
}

// inspect: held when a quorum of nodes names one owner; TTL and fence are
// the quorum-th highest. See docs/topologies.md, "Redlock".
func (r *redlock) inspect(ctx context.Context, k *lockKeys) (lockState, error) {
	res, err := answers(ctx, r, func(cctx context.Context, _ int, n *deployment) (lockState, error) {
		return n.inspect(cctx, k)
	})
	if err != nil {
		return lockState{}, err
	}
	byOwner := map[string][]lockState{}
	var out lockState
	for _, st := range res {
		out.Waiters = max(out.Waiters, st.Waiters)
		if st.owner != "" {
			byOwner[st.owner] = append(byOwner[st.owner], st)
		}
	}
	for owner, sts := range byOwner {
		if len(sts) < r.quorum {
			continue
		}
		slices.SortFunc(sts, func(a, b lockState) int { return cmp.Compare(b.Fence, a.Fence) })
		out.Fence = sts[r.quorum-1].Fence
		slices.SortFunc(sts, func(a, b lockState) int { return int(b.TTL - a.TTL) })
		q := sts[r.quorum-1]
		out.owner, out.Held, out.TTL, out.Age = owner, true, q.TTL, q.Age
		for _, st := range sts {
			out.Age = min(out.Age, st.Age)
			out.HolderTag = cmp.Or(out.HolderTag, st.HolderTag)
		}
	}
	return out, nil
}

// scan: the union of every node's keys; a node that fails fails the scan.
func (r *redlock) scan(ctx context.Context, glob string, fn func(string) bool) error {
	for _, n := range r.nodes {
		more := true
		if err := n.scan(ctx, glob, func(key string) bool { more = fn(key); return more }); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}
