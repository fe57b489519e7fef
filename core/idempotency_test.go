package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// The fault of these tests: a reply later than the client's read timeout.
// go-redis (with its default MaxRetries, 3) then sends the same command
// again on a new connection, so every script may run twice; each test
// counts the EVALSHA commands that reached Redis to prove it did.
const (
	lateReadTimeout = 300 * time.Millisecond
	lateReply       = 700 * time.Millisecond
)

// lateClient returns a proxy in front of srv and a client through it with
// go-redis's default retries and the read timeout given.
func lateClient(t *testing.T, srv *redistest.Server, readTimeout time.Duration) (*redistest.Proxy, *redis.Client) {
	return lateClientCtx(t, srv, readTimeout, false)
}

// lateClientCtx is lateClient, with ContextTimeoutEnabled as given.
func lateClientCtx(t *testing.T, srv *redistest.Server, readTimeout time.Duration, ctxTimeout bool) (*redistest.Proxy, *redis.Client) {
	t.Helper()
	p := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: readTimeout, WriteTimeout: readTimeout, ContextTimeoutEnabled: ctxTimeout})
	t.Cleanup(func() { c.Close() })
	return p, c
}

// evalsha matches the lock scripts on key's lock hash.
func evalsha(key string) redistest.Matcher {
	return redistest.MatchCommand("evalsha", "lockgate:{"+key+"}")
}

// releaseOf matches a release of key's lock: its release script, or the
// HDEL of a lean hold.
func releaseOf(t *testing.T, key string) redistest.Matcher {
	rel, hdel := script(t, "release", key), redistest.MatchCommand("hdel", "lockgate:{"+key+"}")
	return func(cmd []string) bool { return rel(cmd) || hdel(cmd) }
}

// script matches the script of scripts/<name>.lua (by its SHA1, as EVALSHA
// names it) on key's lock hash.
func script(t *testing.T, name, key string) redistest.Matcher {
	t.Helper()
	src, err := core.ScriptSource(name)
	if err != nil {
		t.Fatal(err)
	}
	return redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(src))), "lockgate:{"+key+"}")
}

// A fresh Lock whose reply is late runs twice in Redis and has the effect of
// once: the same fence, not re-entrant, and the caller's one Unlock frees
// the lock for the next owner at once (before: a hold count of 2, and the
// lock held by nobody for its TTL). Also when the lock's hash is a leftover
// that is no hold (a lone w): the first run deletes it and takes the lock,
// the second finds its own hold.
func TestLateReplyFreshLock(t *testing.T) {
	t.Parallel()
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) { testLateReplyFreshLock(t, ctxTimeout, false) })
	}
	t.Run("leftover", func(t *testing.T) { testLateReplyFreshLock(t, false, true) })
}

func testLateReplyFreshLock(t *testing.T, ctxTimeout, leftover bool) {
	srv := redistest.Start(t)
	p, c := lateClientCtx(t, srv, lateReadTimeout, ctxTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l) // the server check and script load, so the hold hits the acquire
	if leftover {
		if err := direct.HSet(ctx, "lockgate:{k}", "w", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}

	acquire := script(t, "acquire", "k")
	runs := p.Watch(acquire)
	h := p.HoldReply(acquire, lateReply)
	s, err := l.Lock(ctx, "k", core.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	within(t, h.Matched(), time.Second, "the held acquire")
	if n := runs.Count(); n < 2 {
		t.Fatalf("%d acquire scripts reached Redis, want 2 or more (go-redis re-sends the late one): the fault did not happen", n)
	}
	if s.Reentrant() {
		t.Fatal("a fresh Lock whose script ran twice reports Reentrant")
	}
	if _, f := holderIn(ctx, direct, "lockgate:{k}"); f != s.Fence() {
		t.Fatalf("fence in Redis %d, lease %d", f, s.Fence())
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := direct.Exists(ctx, "lockgate:{k}").Val(); n != 0 {
		t.Fatal("the lock is still held after the only Unlock")
	}
	// The acquire went unanswered once, so a copy of it may still arrive:
	// the release left the owner's done marker, which stops it.
	if m := direct.Keys(ctx, "lockgate:{k}:done:*").Val(); len(m) != 1 {
		t.Fatalf("done markers after the release of a hold whose acquire went unanswered: %v, want one", m)
	}
	s2, err := other.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("next owner after the Unlock: %v", err)
	}
	s2.Unlock(ctx)
}

// A final Unlock whose reply is late runs twice and answers the same: nil,
// not ErrNotHeld — also when another owner took the lock between the two
// runs (it was woken by the first run's release).
func TestLateReplyUnlock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	s, err := l.Lock(ctx, "k", core.WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A waiter of another Locker takes the lock as soon as the first run
	// of the release frees it.
	got := make(chan *core.Lease, 1)
	go func() {
		s2, err := other.Lock(ctx, "k", core.WithWait(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- s2
	}()
	waitSubscribers(t, direct, "lockgate:{k}", 1)
	release := script(t, "release", "k")
	runs := p.Watch(release)
	h := p.HoldReply(release, lateReply)
	err = s.Unlock(ctx)
	within(t, h.Matched(), time.Second, "the held release")
	if n := runs.Count(); n < 2 {
		t.Fatalf("%d release scripts reached Redis, want 2 or more: the fault did not happen (Unlock: %v)", n, err)
	}
	if err != nil {
		t.Fatalf("Unlock whose release ran twice = %v, want nil", err)
	}
	s2 := <-got
	if s2 == nil {
		t.Fatal("the waiter did not get the lock")
	}
	if s2.Fence() <= s.Fence() {
		t.Fatalf("next fence %d not above %d", s2.Fence(), s.Fence())
	}
	// The second run of the release did not touch the new owner's lock.
	if owner := ownerIn(ctx, direct, "lockgate:{k}"); owner == "" {
		t.Fatal("the new owner's lock was deleted by the repeated release")
	}
	if err := s2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The release of a lean hold (taken with no one waiting: one HDEL of its own
// field) whose reply is late answers nil, not ErrNotHeld: the HDEL is sent
// once, so the Unlock sends the release script after it, which finds the lock
// gone and counts it released (the HDEL was sent while the lease was valid:
// no other owner could have taken it before it ran), and leaves a done
// marker. The lock is free for another owner at once. The check that the
// fault happened: Redis ran the HDEL, its reply was held past the client's
// read timeout, and a release script followed it.
func TestLateReplyLeanUnlock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	s, err := l.Lock(ctx, "k", core.WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if m := direct.HGetAll(ctx, "lockgate:{k}").Val(); len(m) != 1 {
		t.Fatalf("lock hash %v, want a lean hold (one field)", m)
	}
	hdel := redistest.MatchCommand("hdel", "lockgate:{k}")
	h := p.HoldReply(hdel, lateReply)
	scripts := p.Watch(script(t, "release", "k"))
	err = s.Unlock(ctx)
	within(t, h.Answered(), time.Second, "Redis's answer to the held HDEL")
	if n := scripts.Count(); n < 1 {
		t.Fatalf("no release script after the late HDEL (Unlock: %v): the fault did not happen as meant", err)
	}
	if err != nil {
		t.Fatalf("Unlock whose HDEL ran unanswered = %v, want nil", err)
	}
	if m := direct.Keys(ctx, "lockgate:{k}:done:*").Val(); len(m) != 1 {
		t.Fatalf("done markers after a release that went unanswered: %v, want one", m)
	}
	s2, err := other.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("next owner after the Unlock: %v", err)
	}
	if owner := ownerIn(ctx, direct, "lockgate:{k}"); owner == "" {
		t.Fatal("the next owner's lock is gone")
	}
	if err := s2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// An inner (re-entered) Unlock sends nothing to Redis, so a late reply
// cannot release the outer hold: another owner stays out while the outer
// lease lives. (Before, the inner release ran twice and freed the outer.)
// The probe: the same hold does catch the outer's final release.
func TestLateReplyInnerUnlock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	outer, err := l.Lock(ctx, "k", core.WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Lock(outer.Context(), "k")
	if err != nil || !inner.Reentrant() {
		t.Fatalf("re-entry: %v, %v", inner, err)
	}
	h := p.HoldReply(releaseOf(t, "k"), lateReply)
	hdel := redistest.MatchCommand("hdel", "lockgate:{k}")
	calls := p.Watch(func(cmd []string) bool { return evalsha("k")(cmd) || hdel(cmd) })
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls.Count(); n != 0 {
		t.Fatalf("inner Unlock sent %d calls", n)
	}
	if _, err := other.TryLock(ctx, "k"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("another owner while the outer lease lives: %v", err)
	}
	select {
	case <-outer.Done():
		t.Fatalf("outer lease ended: %v", context.Cause(outer.Context()))
	default:
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, h.Matched(), time.Second, "the outer release caught by the hold (probe)")
}

// A nested Lock of another key, made with a lease's context, whose reply
// does not come within its budget returns ErrUnavailable in time and leaves
// nothing held: the hold it added in Redis is undone (before, an owner
// carried in the context was never undone).
func TestAbandonedNestedLock(t *testing.T) {
	t.Parallel()
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) { testAbandonedNestedLock(t, ctxTimeout) })
	}
}

func testAbandonedNestedLock(t *testing.T, ctxTimeout bool) {
	srv := redistest.Start(t)
	p, c := lateClientCtx(t, srv, time.Second, ctxTimeout) // without ContextTimeoutEnabled, the client gives up on the held reply after 1s, long after the Lock
	l := locktest.Locker(t, c)
	other, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	outer, err := l.Lock(ctx, "order:1")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	h := p.HoldReply(script(t, "acquire", "stock:7"), 2*time.Second)
	type res struct {
		err  error
		took time.Duration
	}
	got := make(chan res, 1)
	go func() {
		start := time.Now()
		_, err := l.Lock(outer.Context(), "stock:7", core.WithWait(200*time.Millisecond))
		got <- res{err, time.Since(start)}
	}()
	within(t, h.Matched(), time.Second, "the held acquire")
	// Probe: the script really ran, the hold is in Redis while its caller
	// still waits for the reply.
	if n := direct.Exists(ctx, "lockgate:{stock:7}").Val(); n != 1 {
		t.Fatal("the held acquire added no hold: the fault did not happen")
	}
	r := <-got
	t.Logf("nested Lock with a 200ms budget and a reply held 2s returned after %v: %v", r.took, r.err)
	if !errors.Is(r.err, core.ErrUnavailable) || errors.Is(r.err, core.ErrNotObtained) {
		t.Fatalf("nested Lock = %v, want ErrUnavailable only", r.err)
	}
	if r.took > 200*time.Millisecond+time.Second {
		t.Fatalf("nested Lock took %v with a 200ms budget", r.took)
	}
	// The undo runs once go-redis gives up; bounded wait for the key to go.
	gone := false
	for i := 0; i < 100 && !gone; i++ {
		gone = direct.Exists(ctx, "lockgate:{stock:7}").Val() == 0
		if !gone {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !gone {
		t.Fatal("the abandoned nested Lock left its hold in Redis")
	}
	s, err := other.TryLock(ctx, "stock:7")
	if err != nil {
		t.Fatalf("another owner after the abandoned Lock: %v", err)
	}
	s.Unlock(ctx)
}

// The client never re-sends a lock script behind the Locker's back: a
// TryLock whose reply comes later than the client's read timeout reaches
// Redis once (go-redis, with its default retries, would send it again), is
// answered as unavailable, and what it did is undone — the lock is free
// afterwards. Control: the same late reply to a script sent as go-redis
// sends one by itself (redis.Script.Run) makes Redis run it twice.
func TestLateReplyIsNotResent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, lateReadTimeout)
	l := locktest.Locker(t, c)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	acquire := script(t, "acquire", "once")
	runs := p.Watch(acquire)
	h := p.HoldReply(acquire, lateReply)
	_, err := l.TryLock(ctx, "once")
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("TryLock whose reply came after the read timeout = %v, want ErrUnavailable", err)
	}
	within(t, h.Released(), 2*time.Second, "the held acquire")
	if n := runs.Count(); n != 1 {
		t.Fatalf("%d acquire scripts reached Redis, want exactly one (the client re-sent it)", n)
	}
	// The undo released what the attempt took: another owner gets it.
	s, err := other.Lock(ctx, "once", core.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("the lock after an undone late TryLock: %v", err)
	}
	s.Unlock(ctx)

	// Control: go-redis's own script call re-sends on the late reply.
	plain := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	if err := plain.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	ctl := redistest.MatchCommand("evalsha", plain.Hash(), "ctl")
	ctlRuns := p.Watch(ctl)
	p.HoldReply(ctl, lateReply)
	if err := plain.Run(ctx, c, []string{"ctl"}).Err(); err != nil {
		t.Logf("the control's call: %v", err)
	}
	if n := ctlRuns.Count(); n < 2 {
		t.Fatalf("control: a go-redis script call with a late reply reached Redis %d times, want 2 or more", n)
	}
}
