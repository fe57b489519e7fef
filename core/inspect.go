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
	// Held is true while an owner holds the lock (re-entries are not in Redis).
	Held bool
	// TTL is the lock's remaining time to live in Redis (zero when free).
	TTL time.Duration
	// Fence is the holder's fencing token (zero when free).
	Fence int64
	// Age is how long ago the holder was granted the lock, by the server's clock
	// (read from the fence: the grant's server time in µs, unless raised; on
	// Redlock less by the lead of the fence the Locker proposed, 10ms plus its
	// clock's offset, at most 100ms).
	Age time.Duration
	// Waiters counts live queue entries (Redlock waiters do not queue).
	Waiters int
	// HolderTag is what the holder's WithHolderTag function stored, or empty.
	HolderTag string
	// Readers counts live read holds (RLock); Held is then false and TTL is the
	// longest reader's. Over 1000 it counts entries, live or not.
	Readers int
}

// lockState is LockInfo plus the holder's owner id (for ForceRelease only).
type lockState struct {
	LockInfo
	owner string
}

// Inspect returns what Redis knows of the lock named key, changing nothing,
// within ctx's deadline or the attempt timeout (whichever is first) plus 50ms.
// On a Redlock it is held when a quorum names one owner (TTL, fence: theirs).
// Errors: ErrInvalid for a bad key; ErrUnavailable when Redis fails or does
// not answer in time; ErrClosed after Close.
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
	r, err := bounded(l, ctx, l.callDeadline(ctx), func(cctx context.Context) (lockState, error) { return l.be.inspect(cctx, &k) }, nil)
	if err != nil {
		return lockState{}, opError("inspect", err)
	}
	r.Key = key
	return r, nil
}

// opError is an operator's call error: ErrClosed as is, else ErrUnavailable.
func opError(op string, err error) error {
	if err == ErrClosed || errors.Is(err, ErrUnavailable) {
		return err
	}
	return unavailable(op, err)
}

// ForceRelease removes the lock named key whoever holds it, returning what it
// removed (Held false: it was free); the first live waiter gets the lock. An
// operator's last resort for a holder known gone: a live holder learns only at
// its next renewal (ErrLockLost), and its Unlock reports ErrNotHeld. Readers
// (RLock) are left untouched. Errors: as Inspect; ErrNotHeld when the lock
// changed hands meanwhile (nothing removed); ErrUnavailable when the release
// failed (the hold may or may not be gone: Inspect again).
// See docs/fencing.md, "Fencing".
func (l *Locker) ForceRelease(ctx context.Context, key string) (LockInfo, error) {
	st, err := l.inspect(ctx, key)
	if err != nil || !st.Held {
		return st.LockInfo, err
	}
	k := l.keysFor(key)
	held, err := bounded(l, ctx, l.callDeadline(ctx), func(cctx context.Context) (bool, error) { return l.be.forceRelease(cctx, &k, st.owner) }, nil)
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

// List returns at most limit (DefaultListLimit if <= 0) names of existing
// locks matching match (a Redis glob; empty: all), in no order. It SCANs every
// master's keys under the prefix, so it costs time in the server's keys: an
// operator's tool, not for every request. Errors: ErrUnavailable when a node
// fails or does not answer within ctx; ErrClosed after Close.
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
	glob := globEscape(l.opts.prefix) + "{" + braceEscaper.Replace(match) + "}"
	// Only ctx bounds a scan. The names come only from the call's answer: the
	// call may run on a goroutine of the Locker.
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

func (s *deployment) inspect(ctx context.Context, k *lockKeys) (lockState, error) {
	r, err := inspectScript.run(ctx, s.c, []any{k.args[0], k.args[3]}).Slice()
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

// scan calls fn with every hash key matching glob, on every master, until false.
func (s *deployment) scan(ctx context.Context, glob string, fn func(string) bool) error {
	stop := errors.New("enough")
	one := func(ctx context.Context, c redis.Cmdable, fn func(string) bool) error {
		it := c.ScanType(ctx, 0, glob, 1000, "hash").Iterator()
		for it.Next(ctx) {
			if !fn(it.Val()) {
				return stop
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		// Masters scan in parallel: one fn call at a time, none after false.
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
