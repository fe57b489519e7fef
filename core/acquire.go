package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// acquisition is one Lock or TryLock call that goes to Redis.
type acquisition struct {
	l        *Locker
	key      string
	keys     lockKeys // addressed by the hold: no copy
	o        callOptions
	owner    ownerID
	waits    bool      // a Lock with a wait budget: it queues in Redis
	deadline time.Time // end of the wait budget or of ctx; zero: none
	ctxEnds  bool      // deadline is ctx's
	attempts int

	// refreshes of the queue entry: sentAt[i] is when refresh i+1 was sent
	// (monotonic ns), the moment a hold granted on it is valid from; it
	// starts in firstSent, so that a call answered at once allocates none
	sentAt    []int64
	firstSent [1]int64

	// uncertain: an attempt of this owner failed after it may have reached
	// Redis (no answer in time, a cut connection): it may have run, or
	// still run, unseen; the hold's release then leaves a done marker
	uncertain bool

	unavail error         // the last attempt failed (Redlock: too few nodes answered)
	retryIn time.Duration // the wait after the last failed attempt; it doubles while they fail
	nextTry time.Time     // a waiter's next attempt is due then, whatever wakes it (zero: none)
	holder  holderSeen    // the holder, as the last busy answer (or handover) told

	// observations (Event)
	tag       any    // the caller's holder tag (WithHolderTag), nil without a tag function
	holderTag string // the last holder tag a busy answer carried
	waited    bool   // the call waited in the queue
	offset    time.Duration
	sampled   bool // offset is an estimate of the server's clock
}

// holderSeen is what a waiting call knows of the lock's holder: how long it
// had (ttl) when that was learnt (at). The zero value: nothing is known (no
// busy answer yet).
type holderSeen struct {
	ttl time.Duration
	at  time.Time
}

func (h holderSeen) seen() bool { return !h.at.IsZero() }

// ends is when the holder's TTL runs out unless it is renewed: the lock is
// then free for the first waiter though no release tells anyone.
func (h holderSeen) ends() time.Time { return h.at.Add(h.ttl) }

// left is how much of the holder's TTL is left now (0 once it ran out).
func (h holderSeen) left() time.Duration { return max(time.Until(h.ends()), 0) }

// busy is the error of a call that last saw the lock busy. Once the
// holder's TTL as last seen has run out (it renewed, or the budget ended
// as it ran out), the hint is no longer than the whole of that TTL.
func (a *acquisition) busy() error {
	left := a.holder.left()
	hint := a.l.holdTimes.hint(left)
	if left == 0 && a.holder.ttl > 0 {
		hint = min(hint, a.holder.ttl)
	}
	return &BusyError{Key: a.key, RetryAfter: hint, HolderTTL: left, Permits: a.keys.permits}
}

// expired is the error of a call whose deadline passed while no attempt
// was in flight: busy, joined with context.DeadlineExceeded when the
// deadline was ctx's (ctx.Done may not have fired yet).
func (a *acquisition) expired() error {
	last := a.busy()
	if a.unavail != nil {
		last = a.unavail // a Redlock whose last attempt had too few nodes
	}
	if a.ctxEnds {
		return errors.Join(last, context.DeadlineExceeded)
	}
	return last
}

// ended is the error of a call whose ctx ended while no attempt was in
// flight: the context's error, joined with busy when a busy answer was seen.
func (a *acquisition) ended(ctx context.Context) error {
	if a.unavail != nil {
		return errors.Join(a.unavail, ctxErr(ctx))
	}
	if a.holder.seen() {
		return errors.Join(a.busy(), ctxErr(ctx))
	}
	return ctxErr(ctx)
}

// attempt sends the acquire script once (for a waiting caller, a refresh of
// its queue entry), bounded by the call's deadline. It returns a lease, or
// an error that ends the call, or neither: busy, or (Redlock) split or a
// failure that may pass, the call going on within its budget.
func (a *acquisition) attempt(ctx context.Context) (*Lease, error) {
	l, o := a.l, &a.o
	a.attempts++
	sent := l.clock()
	entry, seq := noEntry, 0
	if a.waits {
		entry = o.entryArg
		a.sentAt = append(a.sentAt, sent)
		seq = len(a.sentAt)
	}
	owner := a.owner // a Redlock split changes a.owner; a late result is this one's
	a.nextTry = time.Time{}
	var wall time.Time
	if l.opts.observer != nil {
		wall = time.Now()
	}
	var undoLate func(acquireReply, error)
	if l.answersLate() {
		undoLate = func(r acquireReply, err error) {
			if neverRan(err) || err == nil && (r.found == foundEnded || r.found == foundBusy && !a.waits) {
				return // nothing to undo
			}
			a.undoOwner(owner)
		}
	}
	r, err := boundedProbed(l, ctx, a.deadline, !a.waits || !l.retriesRefusals(), func(cctx context.Context) (acquireReply, error) {
		return l.be.acquire(cctx, &a.keys, owner, o.ttlArg, entry, seq, a.tag)
	}, undoLate)
	if err == nil {
		l.answered() // Redis answers: undos waiting for it go now
	}
	switch {
	case err != nil:
		return nil, a.failed(ctx, owner, err)
	case r.found == foundHeld:
		return a.took(ctx, r.fence, sent, wall)
	case r.found == foundEnded:
		return nil, a.failed(ctx, owner, errEnded)
	case r.found == foundSplit:
		// Redlock: some nodes granted, too few for a majority, and no
		// majority is busy: give them back, try again soon.
		a.undoOwner(owner)
		a.freshOwner()
	case r.stray:
		// Redlock: busy, and a node granted: give it back, and wait for
		// the holder as after any busy answer (under a new owner: the
		// give-back leaves the old one's done markers).
		a.undoOwner(owner)
		a.owner = a.keys.owner(newOwnerID())
	}
	a.holder = holderSeen{ttl: r.wait, at: time.Now()}
	a.unavail, a.retryIn = nil, 0
	if r.holder != "" {
		a.holderTag = r.holder
	}
	return nil, nil
}

// late is the error of an attempt that Redis did not answer within the
// call's budget (its answer, if it comes, is undone: see attempt).
func (a *acquisition) late(ctx context.Context) error {
	err := unavailable("acquire", errNoAnswer)
	if a.unavail != nil {
		err = errors.Join(err, a.unavail) // a Redlock's earlier attempts name their nodes
	}
	if ctx.Err() != nil {
		err = errors.Join(err, ctxErr(ctx))
	}
	return err
}

// errEnded is the reason of a call whose own hold or wait Redis found
// already ended (foundEnded): undone while the call still went on.
var errEnded = errors.New("this acquisition already ended")

// failed handles an attempt of owner that ended in err: nil when the call
// goes on (it tries again within its budget), else its error.
func (a *acquisition) failed(ctx context.Context, owner ownerID, err error) error {
	l := a.l
	switch {
	case err == ErrClosed:
		return err
	case isPermits(err):
		if a.waited {
			a.undo() // leave the queue
		}
		return err
	case err != errEnded && !neverRan(err):
		a.uncertain = true // it may have run, or may still run
	}
	if err == errLate {
		return a.late(ctx)
	}
	// The call's context is not the caller's (bounded detaches it): a
	// context error here is the budget ending before Redis answered.
	cause := err
	err = unavailable("acquire", withCause(cause))
	if dialFailed(cause) {
		l.reloadSlots()
	}
	switch {
	case ctx.Err() != nil:
		err = errors.Join(err, ctxErr(ctx))
	case !l.be.queues() && a.waits:
		a.retryFresh(cause, err) // Redlock: too few nodes answered this time
		return nil
	case a.waited && cause != errEnded && (!definitive(cause) || l.failingOver(cause)),
		a.waits && (transient(cause) || l.failingOver(cause)):
		// A waiting call keeps its owner (and, queued, its place) through
		// a failure that may pass (a node restarting, a failover, a cut
		// connection, a dead master's address dialled while the deployment
		// fails over): it tries again soon, and its next answer tells
		// whether this attempt took the lock; unavailable only if the
		// budget ends first. (errEnded, its own wait undone, ends it:
		// nothing of a wait is undone while it goes on.)
		a.retryAfter(cause, err)
		return nil
	}
	if !neverRan(cause) || a.uncertain || a.waited && !l.mut.keepEntry {
		// It (or an earlier attempt) may have taken the lock, or queued; a
		// waiter's entry is in the queue whatever this attempt did, and
		// left there it stays live until it expires (TTL/2): a release
		// meanwhile would grant the lock to a caller that is gone.
		a.undo()
	}
	return err
}

// retryFresh has a Redlock waiter whose attempt too few nodes answered
// (cause, err its error) try again within its budget: under a new owner
// (what this one was granted is given back), after a backoff with jitter;
// it ends unavailable only if that is still so when the budget ends.
func (a *acquisition) retryFresh(cause, err error) {
	a.undo()
	a.freshOwner()
	if a.l.mut.noRedlockBackoff {
		a.unavail = err
		return
	}
	a.retryAfter(cause, err)
	a.nextTry = a.nextTry.Add(jitter())
}

// retryAfter has a waiting call try again after cause, a failure that may
// pass: after a backoff doubled each time, from retryMin up to the lease's
// refresh interval (failoverRetry at most while the deployment fails over,
// or for a Redlock, whose nodes may come back at any moment); it ends
// unavailable with err if its budget ends first.
func (a *acquisition) retryAfter(cause, err error) {
	a.unavail = err
	a.retryIn = min(max(2*a.retryIn, retryMin), refresh(a.o.ttl))
	if a.l.failingOver(cause) || !a.l.be.queues() {
		a.retryIn = min(a.retryIn, failoverRetry)
	}
	a.nextTry = time.Now().Add(a.retryIn)
}

// took makes the lease of an attempt sent at sent (monotonic ns; wall:
// the wall clock then, when observed) that answered fence.
func (a *acquisition) took(ctx context.Context, fence, sent int64, wall time.Time) (*Lease, error) {
	l, o := a.l, &a.o
	if !wall.IsZero() && a.attempts == 1 {
		// A first attempt's fence is the server's clock when the script
		// ran (a later one's may be a grant's, issued earlier), against
		// the midpoint of the round trip (the answer was just delivered).
		a.offset = time.UnixMicro(fence).Sub(wall.Add(time.Since(wall) / 2))
		a.sampled = true
	}
	validUntil := sent + int64(o.ttl-l.drift(o.ttl))
	if l.clock() >= validUntil {
		// The reply came too late to leave any validity: give it back.
		a.undo()
		return nil, unavailable("acquire", errors.New("reply arrived after the lease's validity"))
	}
	if ctx.Err() != nil {
		a.undo()
		return nil, a.ended(ctx)
	}
	return a.newHold(ctx, fence, validUntil, sent+int64(o.ttl/3), false)
}

// newHold makes the hold of a lock this call obtained and its first lease
// (newHeld) and hands the hold to the watchdog.
func (a *acquisition) newHold(ctx context.Context, fence, validUntil, renewAt int64, handedOver bool) (*Lease, error) {
	l := a.l
	s := newHeld(ctx, l, a.key, a.keys, a.owner, &a.o, fence, validUntil, renewAt, handedOver)
	s.h.uncertain.Store(a.uncertain)
	if !l.wd.add(s.h) {
		a.undo()
		return nil, ErrClosed
	}
	return s, nil
}

// undo releases the hold this call's attempts may have added, or its place
// in the queue.
func (a *acquisition) undo() { a.undoOwner(a.owner) }

func (a *acquisition) undoOwner(owner ownerID) { a.l.undo(&a.keys, owner, &a.o) }

// freshOwner readies a Redlock acquisition whose attempt may have left grants
// (given back by the caller under the old owner) for another attempt: under
// a new owner, since the old one's done markers make its attempts no-ops,
// and after a random delay, so that owners that split the nodes do not
// split them again.
func (a *acquisition) freshOwner() {
	a.owner = a.keys.owner(newOwnerID())
	a.nextTry = time.Now().Add(jitter())
}

// jitter is a random wait in [1ms, 11ms): after a Redlock split or release,
// owners that would race try at different moments.
func jitter() time.Duration {
	return time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
}

var noEntry any = ""

// retryMin is how soon a waiting call first tries again after a failed
// attempt; the wait doubles up to its refresh interval, or up to
// failoverRetry while a failover is under way (failingOver): a failover
// ends when a replica is promoted, not by itself, and a call that doubled
// its wait past the promotion would see it late or never, its budget spent.
const (
	retryMin      = 25 * time.Millisecond
	failoverRetry = 250 * time.Millisecond
)

// transient reports whether err is a failure that may pass by itself and
// that the client would have re-sent the call after (see once): the
// connection (a read or write timeout, a cut), a full pool, or a server
// that is loading, read-only for now or between masters. A definitive
// failure is not transient.
func transient(err error) bool {
	if definitive(err) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	for _, p := range transientPrefixes {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

var transientPrefixes = []string{"LOADING", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "ERR max number of clients reached"}

// definitive reports whether err ends a call at once, however much of its
// budget is left, because trying again cannot help before someone changes
// something: no server listens or the name does not resolve (the client
// has already dialled again itself, DialerRetries times), the server
// refused the credentials or the command (authentication, ACL), or the
// lock's key holds another type.
func definitive(err error) bool { return dialFailed(err) || refusedByServer(err) }

// refusedByServer reports whether the server answered err because of how it
// is set up or what the key holds: credentials, permissions, WRONGTYPE.
func refusedByServer(err error) bool {
	return authFailed(err) || redis.HasErrorPrefix(err, "WRONGTYPE")
}

// failingOver reports whether err, a definitive failure on a plain
// client, is on l's client what a failover looks like: a failed dial
// (refused, no route, a name that no longer resolves, timed out) on a
// client that follows failovers (a Sentinel failover client, a Cluster
// client) of a Locker that has reached its deployment before. Until the
// sentinels promote a replica, a failover client dials the dead master's
// address; until the slot map names the promoted replica, a Cluster client
// dials the dead node's. A waiting Lock then tries again within its budget,
// as after a transient failure (a single attempt still ends). Definitive as
// before: a plain client's failed dial (nothing takes over its address),
// and any failed dial before the deployment ever answered this Locker (a
// wrong address, or a deployment down at start-up).
func (l *Locker) failingOver(err error) bool {
	// A probe's refusal is never one: a probe watches a call only while
	// refusals end calls, and the call it stopped goes to its undo.
	return l.retriesRefusals() && dialFailed(err) && !isProbe(err)
}

// retriesRefusals reports whether a waiting Lock of l tries again after a
// failed dial (failingOver).
func (l *Locker) retriesRefusals() bool {
	return l.followsFailovers && l.reached.Load() && !l.mut.refusalDefinitive
}

// reloadSlots asks a Cluster client, after a dial failed, to read its slot
// map again (in the background; go-redis runs one reload at a time, 200ms
// apart at most). Without it a Cluster client goes on dialling a dead
// master's address after its replica was promoted: a dead node sends no
// redirection, and go-redis reloads the map by itself only every 60s
// (ClusterStateReloadInterval), so every call on the node's slots failed
// until then. Other clients: nothing.
func (l *Locker) reloadSlots() {
	if cc, ok := l.client.(*redis.ClusterClient); ok && !l.mut.noSlotReload {
		cc.ReloadState(context.Background())
	}
}

// followsFailovers reports whether c dials whichever master its deployment
// has now: a Sentinel failover client (a *redis.Client whose address is
// go-redis's "FailoverClient") or a Cluster client.
func followsFailovers(c redis.UniversalClient) bool {
	_, cluster := c.(*redis.ClusterClient)
	return cluster || isFailoverClient(c)
}

// isFailoverClient reports whether c is a Sentinel failover client
// (go-redis names its address so).
func isFailoverClient(c redis.UniversalClient) bool {
	p, ok := c.(*redis.Client)
	return ok && p.Options().Addr == "FailoverClient"
}

// dialFailed reports whether err is a failure to connect: the call was
// never sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// authFailed reports whether err is the server refusing the client's
// credentials or the command's permissions: the call did not run.
func authFailed(err error) bool {
	for _, p := range authPrefixes {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "Protocol error: unauthenticated")
}

var authPrefixes = []string{"NOAUTH", "WRONGPASS", "NOPERM"}

// neverRan reports whether a call that failed with err cannot have run (a
// probe's dial says nothing of the call it stopped).
func neverRan(err error) bool { return !isProbe(err) && (dialFailed(err) || authFailed(err)) }

// withCause makes a definitive failure say what it is in words an operator
// reads: a missing password shows as a protocol error otherwise.
func withCause(err error) error {
	if err != nil && strings.Contains(err.Error(), "Protocol error: unauthenticated") {
		return fmt.Errorf("authentication required: the server asks for a password and the client sent none (%w)", err)
	}
	return err
}
