package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// LockInfo is what Redis knows of one lock (Inspect).
type LockInfo struct {
	// Key is the lock name as given to Lock.
	Key string
	// Held is true while an owner holds the lock. (How many times the
	// holder re-entered it is not in Redis: re-entries are counted in the
	// holder's process, by its lease chain.)
	Held bool
	// TTL is the lock's remaining time to live in Redis (zero when free);
	// the holder's watchdog renews it every TTL/3.
	TTL time.Duration
	// Fence is the holder's fencing token (zero when free).
	Fence int64
	// Age is how long ago the holder was granted the lock, by the server's
	// clock (the fence is the server time of the grant in µs, unless it
	// had to be raised above an earlier one).
	Age time.Duration
	// Waiters counts the callers queued for the lock whose queue entry is
	// live (Lock calls waiting in a Redlock are not queued, so not counted).
	Waiters int
	// HolderTag is what the holder's WithHolderTag function stored (the
	// otel module's: the holder's W3C traceparent, which names its trace
	// id); empty when none.
	HolderTag string
	// Readers counts the live read holds (RLock) while readers, not a
	// writer, hold the lock: Held is then false, and TTL is the
	// longest-lived reader's. Over 1000 it counts entries, live or not.
	Readers int
}

// lockState is a backend's view of one lock: LockInfo and the owner id,
// which only ForceRelease uses and nothing shows.
type lockState struct {
	LockInfo
	owner string
}

// Inspect returns what Redis knows of the lock named key, taking and
// changing nothing (one read-only script), within ctx's deadline or the
// attempt timeout, whichever is first, plus at most 50ms, whatever the
// client's timeouts. On a Redlock the lock is held when a quorum of nodes
// names one owner; its TTL and fence are then that quorum's.
//
// Errors: ErrInvalid for a bad key; an ErrUnavailable error when Redis does
// not answer in time or fails; ErrClosed after Close.
func (l *Locker) Inspect(ctx context.Context, key string) (LockInfo, error) {
	st, err := l.inspect(ctx, key)
	return st.LockInfo, err
}

func (l *Locker) inspect(ctx context.Context, key string) (lockState, error) {
	if err := validateKey(key); err != nil {
		return lockState{}, err
	}
	if l.closed.Load() {
		return lockState{}, ErrClosed
	}
	k := l.keysFor(key)
	r, err := boundedCall(l, ctx, func(cctx context.Context) (lockState, error) { return l.be.inspect(cctx, &k) })
	if err != nil {
		return lockState{}, opError("inspect", err)
	}
	r.Key = key
	return r, nil
}

// boundedCall runs an operator's call (Inspect, ForceRelease) within
// callDeadline plus replyGrace, as Lease.TTL does: errLate when Redis has
// not answered by then. A late answer is dropped: these calls change
// nothing, or (ForceRelease) say that they may have.
func boundedCall[T any](l *Locker, ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	return bounded(l, ctx, l.callDeadline(ctx), call, nil)
}

// opError is the error of an operator's call op: ErrClosed as it is,
// anything else (no answer in time, a failing server) an ErrUnavailable
// error.
func opError(op string, err error) error {
	switch {
	case err == ErrClosed, errors.Is(err, ErrUnavailable):
		return err
	case err == errLate:
		return unavailable(op, errNoAnswer)
	}
	return unavailable(op, err)
}

// ForceRelease removes the lock named key whoever holds it and returns what
// it removed (Held false: the lock was free, nothing was done); the release
// hands the lock to the first live waiter. It is an operator's last resort
// for a holder known to be gone: a live holder learns of it only at its next
// renewal (ErrLockLost), so fence the resource (docs/fencing.md). It removes
// exactly the hold it inspected; the holder's own Unlock then reports
// ErrNotHeld. It removes a writer only: a lock that readers (RLock) hold is
// returned with Held false and Readers set, untouched; they leave or expire.
//
// Errors: as Inspect; ErrNotHeld when the lock changed hands meanwhile
// (nothing removed); an ErrUnavailable error from the release means the
// hold may or may not have been removed (Inspect again).
func (l *Locker) ForceRelease(ctx context.Context, key string) (LockInfo, error) {
	st, err := l.inspect(ctx, key)
	if err != nil || !st.Held {
		return st.LockInfo, err
	}
	k := l.keysFor(key)
	held, err := boundedCall(l, ctx, func(cctx context.Context) (bool, error) { return l.be.forceRelease(cctx, &k, st.owner) })
	switch {
	case err != nil:
		return st.LockInfo, opError("release", err)
	case !held:
		return st.LockInfo, fmt.Errorf("%w: the lock changed hands since it was inspected; nothing was removed", ErrNotHeld)
	}
	return st.LockInfo, nil
}

// DefaultListLimit is List's limit when it is given one of 0 or less.
const DefaultListLimit = 100

// List returns the names of locks that exist now (held, or granted to a
// waiter) whose name matches match (Redis glob syntax: * ? [..] \; empty
// matches all), at most limit of them (DefaultListLimit for limit <= 0),
// in no particular order. It SCANs the keys under the Locker's prefix, on
// every master of a Cluster and of a Redlock, so it costs time in the
// number of keys on the server, not the number of locks: an operator's
// tool, not something to call per request.
//
// Errors: an ErrUnavailable error when a node does not answer within ctx
// or fails; ErrClosed after Close.
func (l *Locker) List(ctx context.Context, match string, limit int) ([]string, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if match == "" {
		match = "*"
	}
	glob := l.globFor(match)
	// The names are collected by the call (on the Locker's goroutine when
	// the client does not bound it): the caller gets them only from its
	// answer. A scan may take longer than one attempt: only ctx bounds it.
	deadline, _ := ctx.Deadline()
	names, err := bounded(l, ctx, deadline, func(cctx context.Context) ([]string, error) {
		seen := map[string]bool{}
		var names []string
		err := l.be.scan(cctx, glob, func(key string) bool {
			name, ok := l.nameOf(key)
			if ok && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
			return len(names) < limit
		})
		return names, err
	}, nil)
	if err != nil {
		return names, opError("list", err)
	}
	return names, nil
}

// inspectReply reads the inspect script's answer.
func inspectReply(cmd *redis.Cmd) (lockState, error) {
	r, err := cmd.Slice()
	if err != nil {
		return lockState{}, err
	}
	if len(r) != 8 {
		return lockState{}, fmt.Errorf("unexpected inspect reply %v", r)
	}
	owner, _ := r[0].(string)
	fence, _ := r[1].(int64)
	pttl, _ := r[2].(int64)
	sec, _ := r[3].(int64)
	usec, _ := r[4].(int64)
	waiters, _ := r[5].(int64)
	tag, _ := r[6].(string)
	readers, _ := r[7].(int64)
	st := lockState{owner: owner, LockInfo: LockInfo{Waiters: int(waiters), Readers: int(readers)}}
	if owner != "" {
		st.Held, st.Fence, st.HolderTag = true, fence, tag
		st.Age = max(time.Unix(sec, usec*1000).Sub(time.UnixMicro(fence)), 0)
	}
	if owner != "" || readers > 0 {
		st.TTL = time.Duration(max(pttl, 0)) * time.Millisecond
	}
	return st, nil
}

func (s *deployment) inspect(ctx context.Context, k *lockKeys) (lockState, error) {
	return inspectReply(inspectScript.run(ctx, s.c, []any{k.args[0], k.args[3]}))
}

// scan calls fn with each key matching glob that is a hash, on every
// master, until fn returns false.
func (s *deployment) scan(ctx context.Context, glob string, fn func(string) bool) error {
	stop := errors.New("enough")
	one := func(ctx context.Context, c redis.Cmdable, fn func(string) bool) error {
		var cursor uint64
		for {
			keys, next, err := c.ScanType(ctx, cursor, glob, 1000, "hash").Result()
			if err != nil {
				return err
			}
			for _, key := range keys {
				if !fn(key) {
					return stop
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		// The masters are scanned in parallel: one fn call at a time, and
		// none after one said enough.
		var mu sync.Mutex
		done := false
		locked := func(key string) bool {
			mu.Lock()
			defer mu.Unlock()
			if !done && !fn(key) {
				done = true
			}
			return !done
		}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return one(ctx, c, locked)
		})
	} else {
		err = one(ctx, s.c, fn)
	}
	if err == stop {
		return nil
	}
	return err
}
