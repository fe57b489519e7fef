package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/lockgate/lockgate/core"
)

// locker is one configuration's lock as the benchmarks drive it: one
// instance is one node (its own client or clients).
type locker interface {
	// do takes key, runs fn (when not nil) while holding it, and releases
	// it. A budget above 0 bounds the wait (a context deadline for the
	// peers; lockgate has the same 2s as its own wait budget). Errors:
	// errBusy (wrapped) when the lock was not obtained within the budget;
	// releaseErr when fn ran but the release failed; others as they come.
	do(ctx context.Context, key string, budget time.Duration, fn func()) error
	close()
}

// errBusy marks "not obtained": busy at the end of the wait budget.
var errBusy = errors.New("not obtained within the wait budget")

// errRelease marks a failed release after the critical section ran.
var errRelease = errors.New("release failed")

func busyErr(err error) error    { return fmt.Errorf("%w: %w", errBusy, err) }
func releaseErr(err error) error { return fmt.Errorf("%w: %w", errRelease, err) }

// peer is one locker configuration.
type peer struct {
	name    string // row name
	module  string // Go module, for its version in the report
	config  string // how it is configured, in words
	waits   string // how it waits for a busy lock
	servers int    // redis-servers it uses: 1, or 3 (Redlock); for cluster, its masters
	// cluster: it runs on the run's 3-master Redis Cluster, through a
	// go-redis Cluster client
	cluster bool
	// manyKeys: it also runs the contended benchmark on 8 keys at once
	manyKeys bool
	// uncontended, contended: which benchmarks it takes part in
	uncontended, contended bool
	// topLevel names the commands it sends outside scripts (the rest run
	// inside EVALSHA): its server time is their INFO commandstats usec and
	// its scripts', whose usec covers the commands they run
	topLevel []string
	// open makes instance i (a node) with its own clients, counted by cnt
	// when not nil.
	open func(e *env, i int, cnt *counters) (locker, error)
}

// Timing knobs of the peers' "tuned" configurations. A sweep of fixed retry
// delays (0.5, 1, 2, 5, 10, 20ms; 2s contended runs, both holds) on the
// 2-core development machine: 2ms gave redislock, redsync and redlock3 the
// most (or, within noise, as many) handoffs/s at hold 2ms, and at hold 0
// about the best too; 0.5–1ms were no faster and cost up to twice the
// server commands; 5ms and longer lost handoffs (a polling winner tends to
// take its own lock straight back).
const (
	redislockDefaultRetry = 100 * time.Millisecond // the README example's cadence
	redislockTunedRetry   = 2 * time.Millisecond
	redsyncTunedDelay     = 2 * time.Millisecond
	redsyncTunedTries     = 100000 // the 2s context ends it first
	// ttl for the peers whose API wants one per call (redislock): lockgate's default.
	peerTTL = 30 * time.Second
)

// budgetPeers is the wait budget of every contended waiter.
const waitBudget = 2 * time.Second

func peers() []peer {
	return []peer{
		{
			name: "floor", topLevel: []string{"set"}, module: "github.com/redis/go-redis/v9", servers: 1, uncontended: true,
			config: "SET key tok NX PX 30000, then EVALSHA compare-and-delete, through go-redis",
			waits:  "does not wait (uncontended only).",
			open:   openFloor,
		},
		{
			name: "lockgate", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true, contended: true, manyKeys: true,
			config: "core.New(client, core.WithWait(2s)), otherwise defaults (TTL 30s, watchdog on)",
			waits:  "queues waiters FIFO in Redis; a release hands the lock to the head waiter in the release script and tells it by SPUBLISH on the lock's sharded channel (one Pub/Sub connection per Locker), so waiting does not poll; each waiter re-sends its queue entry every TTL/3 (10s) as the fallback.",
			open:   openLockgate(true),
		},
		{
			name: "lockgate/no-ctx-timeout", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true,
			config: "as lockgate, on a go-redis client without ContextTimeoutEnabled (lockgate then bounds each call from a goroutine of its own)",
			waits:  "as lockgate.",
			open:   openLockgate(false),
		},
		{
			name: "lockgate/held=1k", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true,
			config: "as lockgate, holding 1 000 other leases (TTL 3s) for the whole run: the watchdog renews them every second, in batches of up to 1000 per round trip (keys left/cycle counts them)",
			waits:  "as lockgate.",
			open:   openLockgateHolding(1000),
		},
		{
			name: "lockgate/held=10k", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true,
			config: "as lockgate/held=1k, holding 10 000 leases",
			waits:  "as lockgate.",
			open:   openLockgateHolding(10000),
		},
		{
			name: "lockgate/semaphore1", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true, contended: true,
			config: "as lockgate, taking one permit of a semaphore of 1 (Locker.Semaphore(ctx, key, 1)): what a permit costs against a lock, on the same workload",
			waits:  "as lockgate: permits are queued FIFO and handed over by the release script in the same way.",
			open:   openLockgateAs(takeSemaphore1),
		},
		{
			name: "lockgate/rlock", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true,
			config: "as lockgate, taking the name's read lock (Locker.RLock(ctx, key)): what a reader costs against a writer's Lock (uncontended only: readers share by design; see Read-heavy)",
			waits:  "as lockgate: readers and writers queue in one FIFO, a release hands the lock on in the same script.",
			open:   openLockgateAs(takeRLock),
		},
		{
			name: "lockgate/multi2", module: "github.com/lockgate/lockgate", servers: 1, uncontended: true, contended: true,
			config: "as lockgate, taking two locks in one lease (Locker.LockMulti(ctx, []string{key, key+\":2\"})): what all-or-none over two names costs",
			waits:  "as lockgate, on each name in a fixed order.",
			open:   openLockgateAs(takeMulti2),
		},
		{
			name: "lockgate/redlock3", module: "github.com/lockgate/lockgate", servers: 3, uncontended: true, contended: true,
			config: "core.NewRedlock over 3 independent redis-servers (majority 2), core.WithWait(2s), otherwise defaults",
			waits:  "asks all three in parallel; a waiter does not queue (grants on independent nodes could go to different waiters) but flags the lock, and a release on any node tells it by SPUBLISH that the lock is free; an owner split between nodes gives its grants back and retries after a random 1–11ms.",
			open:   openLockgateRedlock,
		},
		{
			name: "redislock", module: "github.com/bsm/redislock", servers: 1, uncontended: true, contended: true,
			config: fmt.Sprintf("Obtain(ctx, key, %v, opts); uncontended: nil opts (its default, no retry); contended: RetryStrategy LinearBackoff(%v) (the cadence of its README example) within a 2s context", peerTTL, redislockDefaultRetry),
			waits:  "polls: a failed Obtain retries the obtain script after the RetryStrategy's backoff (default NoRetry: a busy lock fails at once), until the context ends; no notification.",
			open:   openRedislock(redislockDefaultRetry),
		},
		{
			name: "redislock/tuned", module: "github.com/bsm/redislock", servers: 1, contended: true, manyKeys: true,
			config: fmt.Sprintf("as redislock, RetryStrategy LinearBackoff(%v)", redislockTunedRetry),
			waits:  "polls, as redislock, every 2ms.",
			open:   openRedislock(redislockTunedRetry),
		},
		{
			name: "redsync", topLevel: []string{"set"}, module: "github.com/go-redsync/redsync/v4", servers: 1, uncontended: true, contended: true,
			config: "goredis/v9 pool, 1 server, NewMutex defaults (32 tries, random 50–250ms delay, expiry 8s), LockContext within a 2s context",
			waits:  "polls: SET NX on every pool, and on failure a delete script on every pool, then sleeps the retry delay (default random 50–250ms) for up to 32 tries or until the context ends; no notification.",
			open:   openRedsync(1, nil),
		},
		{
			name: "redsync/tuned", topLevel: []string{"set"}, module: "github.com/go-redsync/redsync/v4", servers: 1, contended: true,
			config: fmt.Sprintf("as redsync, WithTries(%d), WithRetryDelay(%v)", redsyncTunedTries, redsyncTunedDelay),
			waits:  "polls, as redsync, every 2ms.",
			open:   openRedsync(1, []redsync.Option{redsync.WithTries(redsyncTunedTries), redsync.WithRetryDelay(redsyncTunedDelay)}),
		},
		{
			name: "redlock3", topLevel: []string{"set"}, module: "github.com/go-redsync/redsync/v4", servers: 3, uncontended: true, contended: true,
			config: "redsync over 3 independent redis-servers (quorum 2), defaults as redsync",
			waits:  "polls, as redsync, on all three servers in parallel.",
			open:   openRedsync(3, nil),
		},
		{
			name: "redlock3/tuned", topLevel: []string{"set"}, module: "github.com/go-redsync/redsync/v4", servers: 3, contended: true,
			config: fmt.Sprintf("as redlock3, WithTries(%d), WithRetryDelay(%v)", redsyncTunedTries, redsyncTunedDelay),
			waits:  "polls, as redsync, every 2ms.",
			open:   openRedsync(3, []redsync.Option{redsync.WithTries(redsyncTunedTries), redsync.WithRetryDelay(redsyncTunedDelay)}),
		},
		{
			name: "rueidislock", module: "github.com/redis/rueidis", servers: 1, uncontended: true, contended: true,
			config: "NewLocker defaults: KeyMajority 2 (3 keys, here on the one server), KeyValidity 5s, TryNextAfter 20ms, client-side caching on; uncontended: TryWithContext, one attempt; contended: WithContext within a 2s context",
			waits:  "is notified: the acquire script also GETs each key, so client-side caching (CLIENT TRACKING) invalidates it on release and the invalidation wakes one waiter of that Locker for that name (a Locker that releases wakes its own next waiter); it polls only when caching is disabled.",
			open:   openRueidislock(false),
		},
		{
			name: "rueidislock/tuned", module: "github.com/redis/rueidis", servers: 1, uncontended: true, contended: true,
			config: "KeyMajority 1 and NoLoopTracking (its README's advice for one Redis ≥ 7.0.5), else defaults",
			waits:  "is notified, as rueidislock, on one key.",
			open:   openRueidislock(true),
		},
		{
			name: "floor/cluster", topLevel: []string{"set"}, module: "github.com/redis/go-redis/v9", servers: clusterMasters, cluster: true, uncontended: true,
			config: "as floor, through a go-redis Cluster client on a Redis Cluster of 3 masters",
			waits:  "does not wait (uncontended only).",
			open:   onCluster(openFloor),
		},
		{
			name: "lockgate/cluster", module: "github.com/lockgate/lockgate", servers: clusterMasters, cluster: true, uncontended: true, contended: true, manyKeys: true,
			config: "as lockgate, on a go-redis Cluster client (ContextTimeoutEnabled) of a Redis Cluster of 3 masters",
			waits:  "as lockgate: one sharded Pub/Sub connection per master that serves a lock waited for.",
			open:   onCluster(openLockgate(true)),
		},
		{
			name: "redislock/cluster", module: "github.com/bsm/redislock", servers: clusterMasters, cluster: true, uncontended: true,
			config: "as redislock, on a go-redis Cluster client of a Redis Cluster of 3 masters",
			waits:  "as redislock.",
			open:   onCluster(openRedislock(redislockDefaultRetry)),
		},
		{
			name: "redislock/tuned/cluster", module: "github.com/bsm/redislock", servers: clusterMasters, cluster: true, contended: true, manyKeys: true,
			config: "as redislock/tuned, on a go-redis Cluster client of a Redis Cluster of 3 masters",
			waits:  "polls, as redislock, every 2ms.",
			open:   onCluster(openRedislock(redislockTunedRetry)),
		},
	}
}

// onCluster is open on the run's Cluster: the clients it makes with
// env.client are Cluster clients.
func onCluster(open func(e *env, i int, cnt *counters) (locker, error)) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		on := *e
		on.useCluster = true
		return open(&on, i, cnt)
	}
}

// client is the go-redis client of an instance of a single-server
// configuration: on the first server, or on the Cluster (see onCluster).
func (e *env) client(cnt *counters, ctxTimeout bool) redis.UniversalClient {
	if e.useCluster {
		return newClusterClient(e, cnt)
	}
	return newClientWith(e.addr(0), cnt, ctxTimeout)
}

// ---- lockgate

type lockgateLocker struct {
	c    redis.UniversalClient
	more []*redis.Client // a Redlock's other nodes
	l    *core.Locker
	take func(ctx context.Context, l *core.Locker, key string) (*core.Lease, error) // nil: Lock
}

// takeSemaphore1 takes the one permit of a semaphore of 1 named key.
func takeSemaphore1(ctx context.Context, l *core.Locker, key string) (*core.Lease, error) {
	return l.Semaphore(ctx, key, 1)
}

// takeRLock takes the read lock of key.
func takeRLock(ctx context.Context, l *core.Locker, key string) (*core.Lease, error) {
	return l.RLock(ctx, key)
}

// takeMulti2 takes the locks key and key+":2" in one lease.
func takeMulti2(ctx context.Context, l *core.Locker, key string) (*core.Lease, error) {
	return l.LockMulti(ctx, []string{key, key + ":2"})
}

// openLockgateAs is lockgate taking its lease with take instead of Lock.
func openLockgateAs(take func(context.Context, *core.Locker, string) (*core.Lease, error)) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		lk, err := openLockgate(true)(e, i, cnt)
		if err != nil {
			return nil, err
		}
		lk.(*lockgateLocker).take = take
		return lk, nil
	}
}

func openLockgate(ctxTimeout bool) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		c := e.client(cnt, ctxTimeout)
		l, err := core.New(c, core.WithWait(waitBudget))
		if err != nil {
			c.Close()
			return nil, err
		}
		return &lockgateLocker{c: c, l: l}, nil
	}
}

// heldTTL is the lease time of the leases a lockgate/held=N locker keeps:
// short, so that the watchdog renews them (every TTL/3) during a run.
const heldTTL = 3 * time.Second

// openLockgateHolding is lockgate holding n other leases (heldTTL) while it
// runs: the cost of the watchdog's renewals and of the state of many
// leases on the path every request takes.
func openLockgateHolding(n int) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		lk, err := openLockgate(true)(e, i, cnt)
		if err != nil {
			return nil, err
		}
		g := lk.(*lockgateLocker)
		ctx := context.Background()
		for k := range n {
			if _, err := g.l.Lock(ctx, "bench:held:"+strconv.Itoa(i)+":"+strconv.Itoa(k), core.WithTTL(heldTTL)); err != nil {
				g.close()
				return nil, fmt.Errorf("holding lease %d of %d: %w", k, n, err)
			}
		}
		return g, nil
	}
}

// openLockgateRedlock is lockgate's Redlock over the run's three servers,
// one client each (ContextTimeoutEnabled, as for lockgate).
func openLockgateRedlock(e *env, i int, cnt *counters) (locker, error) {
	var cs []redis.UniversalClient
	var closers []*redis.Client
	for s := range 3 {
		c := newClientWith(e.addr(s), cnt, true)
		cs = append(cs, c)
		closers = append(closers, c)
	}
	l, err := core.NewRedlock(cs, core.WithWait(waitBudget))
	if err != nil {
		for _, c := range closers {
			c.Close()
		}
		return nil, err
	}
	return &lockgateLocker{c: closers[0], more: closers[1:], l: l}, nil
}

func (g *lockgateLocker) do(ctx context.Context, key string, _ time.Duration, fn func()) error {
	var lease *core.Lease
	var err error
	if g.take != nil {
		lease, err = g.take(ctx, g.l, key)
	} else {
		lease, err = g.l.Lock(ctx, key)
	}
	if err != nil {
		if errors.Is(err, core.ErrNotObtained) {
			return busyErr(err)
		}
		return err
	}
	if fn != nil {
		fn()
	}
	if err := lease.Unlock(ctx); err != nil {
		return releaseErr(err)
	}
	return nil
}

func (g *lockgateLocker) close() {
	g.l.Close()
	g.c.Close()
	for _, c := range g.more {
		c.Close()
	}
}

// ---- bsm/redislock

type redislockLocker struct {
	c     redis.UniversalClient
	l     *redislock.Client
	retry time.Duration
}

func openRedislock(retry time.Duration) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		c := e.client(cnt, true)
		return &redislockLocker{c: c, l: redislock.New(c), retry: retry}, nil
	}
}

func (r *redislockLocker) do(ctx context.Context, key string, budget time.Duration, fn func()) error {
	var opt *redislock.Options // uncontended: its default, no retry
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
		opt = &redislock.Options{RetryStrategy: redislock.LinearBackoff(r.retry)}
	}
	lock, err := r.l.Obtain(ctx, key, peerTTL, opt)
	if err != nil {
		if errors.Is(err, redislock.ErrNotObtained) || ctx.Err() != nil {
			return busyErr(err)
		}
		return err
	}
	if fn != nil {
		fn()
	}
	if err := lock.Release(context.Background()); err != nil {
		return releaseErr(err)
	}
	return nil
}

func (r *redislockLocker) close() { r.c.Close() }

// ---- go-redsync/redsync (goredis/v9 pools)

type redsyncLocker struct {
	cs   []*redis.Client
	rs   *redsync.Redsync
	opts []redsync.Option
}

func openRedsync(servers int, opts []redsync.Option) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		r := &redsyncLocker{opts: opts}
		var pools []redsyncredis.Pool
		for s := range servers {
			c := newClient(e.addr(s), cnt)
			r.cs = append(r.cs, c)
			pools = append(pools, goredis.NewPool(c))
		}
		r.rs = redsync.New(pools...)
		return r, nil
	}
}

func (r *redsyncLocker) do(ctx context.Context, key string, budget time.Duration, fn func()) error {
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || ctx.Err() != nil {
			return busyErr(err)
		}
		return err
	}
	if fn != nil {
		fn()
	}
	if ok, err := m.UnlockContext(context.Background()); err != nil || !ok {
		return releaseErr(fmt.Errorf("unlock: %v, %w", ok, err))
	}
	return nil
}

func (r *redsyncLocker) close() {
	for _, c := range r.cs {
		c.Close()
	}
}

// ---- redis/rueidis rueidislock

type rueidisLocker struct{ l rueidislock.Locker }

func openRueidislock(tuned bool) func(e *env, i int, cnt *counters) (locker, error) {
	return func(e *env, i int, cnt *counters) (locker, error) {
		opt := rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{e.addr(0)}},
		}
		if cnt != nil {
			opt.ClientOption.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				conn, err := d.DialContext(ctx, "tcp", dst)
				return cnt.wrap(conn), err
			}
		}
		if tuned {
			opt.KeyMajority, opt.NoLoopTracking = 1, true
		}
		l, err := rueidislock.NewLocker(opt)
		if err != nil {
			return nil, err
		}
		return &rueidisLocker{l: l}, nil
	}
}

func (r *rueidisLocker) do(ctx context.Context, key string, budget time.Duration, fn func()) error {
	// Uncontended (no budget): one attempt, as redislock's. WithContext
	// would wait, unbounded, for an invalidation of the key after a failed
	// first try: a make bench run once hung 11 minutes in it at 16 callers.
	acquire := r.l.TryWithContext
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
		acquire = r.l.WithContext
	}
	_, unlock, err := acquire(ctx, key)
	if err != nil {
		if errors.Is(err, rueidislock.ErrNotLocked) || ctx.Err() != nil {
			return busyErr(err)
		}
		return err
	}
	if fn != nil {
		fn()
	}
	unlock() // releases every key and waits for the deletes
	return nil
}

func (r *rueidisLocker) close() { r.l.Close() }
