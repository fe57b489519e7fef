package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis server a Locker works with.
// See docs/topologies.md, "Requirements, whatever the topology".
const MinRedisVersion = "7.0.0"

// serverCheck is the Locker's one look at its server before the first lock:
// the version (ErrUnsupported) and the eviction policy (warned once).
type serverCheck struct {
	ok  atomic.Bool
	mu  sync.Mutex            // held by the call that checks
	err atomic.Pointer[error] // set for good once a server too old was seen
}

type serverFacts struct {
	version, policy string
}

// checkServer checks the server once, within the caller's deadline; an
// unreachable server is checked again by the next lock. Other calls do not
// wait for the one checking, or a hung Redis would cost them its budget. On
// a Cluster it reads key's master, which the lock needs anyway: another
// master hung costs the lock nothing (but for loading the slot map, which the
// client asks of any node).
func (l *Locker) checkServer(ctx context.Context, deadline time.Time, key string) error {
	c := &l.server
	if c.ok.Load() {
		return nil
	}
	if err := c.err.Load(); err != nil {
		return *err
	}
	if !c.mu.TryLock() {
		return nil // another call is checking
	}
	if !l.be.traits().queues && !l.mut.checkInline {
		// Redlock: check the first node in the background, so that one node
		// down does not cost a lock its budget (a majority is enough).
		if !l.goBackground(func() {
			defer c.mu.Unlock()
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
			defer cancel()
			l.checkServerLocked(bctx, time.Time{}, "")
		}) {
			c.mu.Unlock()
		}
		return nil
	}
	defer c.mu.Unlock()
	return l.checkServerLocked(ctx, deadline, key)
}

// checkServerLocked is checkServer's look, l.server.mu held.
func (l *Locker) checkServerLocked(ctx context.Context, deadline time.Time, key string) error {
	c := &l.server
	if c.ok.Load() {
		return nil
	}
	f, err := bounded(l, ctx, deadline, func(cctx context.Context) (serverFacts, error) {
		node := l.client
		if cc, ok := node.(*redis.ClusterClient); ok && !l.mut.checkAnyNode {
			n, err := cc.MasterForKey(cctx, key) // loads the slot map the lock needs anyway
			if err != nil {
				return serverFacts{}, err
			}
			node = n
		}
		return readServer(cctx, node)
	}, nil)
	if err == ErrClosed {
		return err
	}
	if err != nil || f.version == "" {
		return nil
	}
	if unsupported := l.judge(ctx, f); unsupported != nil {
		c.err.Store(&unsupported)
		return unsupported
	}
	c.ok.Store(true)
	return nil
}

// judge takes an answering node's facts (attrs name it in the log): an
// ErrUnsupported error for a server too old; a risky eviction policy is
// logged and observed as a warning.
func (l *Locker) judge(ctx context.Context, f serverFacts, attrs ...any) error {
	l.answered()
	unsupported, warning := judgeServer(f)
	if warning != nil {
		l.logger().Warn("lockgate: "+warning.Error(), append(attrs, slog.String("policy", f.policy))...)
		l.observe(ctx, Event{Kind: EventWarning, Err: warning})
	}
	return unsupported
}

// judgeServer returns an ErrUnsupported error for a server too old, and a
// warning for an eviction policy that can evict held locks.
func judgeServer(f serverFacts) (unsupported, warning error) {
	if versionLess(f.version, MinRedisVersion) {
		return fmt.Errorf("%w: redis %s, %s or later is required", ErrUnsupported, f.version, MinRedisVersion), nil
	}
	if f.policy != "" && f.policy != "noeviction" {
		return nil, fmt.Errorf("maxmemory-policy is %q: under memory pressure Redis may evict a held lock and let a second owner in; set it to noeviction", f.policy)
	}
	return nil, nil
}

// readServer reads one node's version (INFO) and eviction policy (CONFIG GET,
// if allowed) in one round trip. When go-redis (v9.23) fails the connection
// setup (WRONGPASS) it leaves the commands empty: that error is returned.
func readServer(ctx context.Context, c redis.UniversalClient) (serverFacts, error) {
	var info *redis.StringCmd
	var policy *redis.MapStringStringCmd
	_, pipeErr := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "server")
		policy = p.ConfigGet(ctx, "maxmemory-policy")
		return nil
	})
	text, err := info.Result()
	if err == nil && text == "" && pipeErr != nil {
		err = pipeErr
	}
	if err != nil {
		return serverFacts{}, err
	}
	f := serverFacts{}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			if f.version == "" || versionLess(v, f.version) {
				f.version = v // the oldest, if several nodes answered
			}
		}
	}
	if m, err := policy.Result(); err == nil {
		f.policy = m["maxmemory-policy"]
	}
	return f, nil
}

// versionLess reports whether dotted version a is older than b.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// markerTTL is how long a done marker is kept: longer than the client can take
// to send a call's last copy (retries × timeouts and backoff), 1s to 10m; 1m
// when unknown or unbounded. See docs/design.md, "Redis layout".
func markerTTL(c redis.UniversalClient) time.Duration {
	var retries int
	var pool, dial, write, read, backoff time.Duration
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		retries, pool, dial, write, read, backoff = o.MaxRetries, o.PoolTimeout, o.DialTimeout, o.WriteTimeout, o.ReadTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options() // MaxRedirects tries, each with the node client's retries
		retries = (o.MaxRedirects+1)*(max(o.MaxRetries, 0)+1) - 1
		pool, dial, write, read, backoff = o.PoolTimeout, o.DialTimeout, o.WriteTimeout, o.ReadTimeout, o.MaxRetryBackoff
	default:
		return time.Minute
	}
	if read <= 0 || write <= 0 || pool <= 0 {
		return time.Minute // no timeout: nothing bounds a call
	}
	t := time.Duration(retries+1) * (pool + dial + write + read + backoff)
	return min(max(t, time.Second), 10*time.Minute)
}

// honoursDeadlines reports whether c bounds its calls by ctx's deadline
// (ContextTimeoutEnabled); never a ReadOnly Cluster client (also set by
// RouteByLatency, RouteRandomly): see docs/internals.md, "Bounded calls".
func honoursDeadlines(c redis.UniversalClient, mut *mutants) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && (!o.ReadOnly || mut.trustReadOnly)
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}
