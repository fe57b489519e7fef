package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// backend is the narrow seam between the Locker (waiting, leases, watchdog)
// and where the lock lives. The single-master implementation below runs one
// script per call; a quorum of independent masters (Redlock) implements the
// same four operations.
type backend interface {
	// acquire tries once (ttl and fenceWindow are milliseconds, as strings
	// boxed once per option set). reserve is the caller's Locker id when it
	// will wait for a busy lock (it then claims the next turn), "" for a
	// single attempt. It returns the fence (> 0) and whether the owner
	// re-entered, or fence 0 and the holder's remaining TTL when busy.
	acquire(ctx context.Context, k *lockKeys, owner string, ttl, fenceWindow, reserve any) (fence int64, reentered bool, holderTTL time.Duration, err error)
	// release undoes one hold; left is the holds remaining, -1 when the
	// owner held nothing. A waiting Locker's turn is kept for turnGrace.
	release(ctx context.Context, k *lockKeys, owner string, fenceWindow any) (left int64, err error)
	// renew extends each lease in batch (one round trip for all) and sets
	// batch[i].held / batch[i].err.
	renew(ctx context.Context, batch []renewal)
	// pttl returns the lock's remaining TTL if owner holds it, else ErrNotHeld.
	pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error)
}

type renewal struct {
	keys     *lockKeys
	ownerArg any // the owner id, boxed once per lease
	ttl      time.Duration
	ttlArg   any // ttl in ms as a string, boxed once per batch
	held     bool
	err      error
}

// single is the backend on one Redis deployment (a master, a Sentinel
// failover client or a Cluster).
type single struct {
	c redis.UniversalClient
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (s single) acquire(ctx context.Context, k *lockKeys, owner string, ttl, fenceWindow, reserve any) (int64, bool, time.Duration, error) {
	v, err := acquireScript.Run(ctx, s.c, k.both[:], owner, ttl, fenceWindow, reserve).Result()
	if err != nil {
		return 0, false, 0, err
	}
	switch r := v.(type) {
	case int64:
		if r > 0 {
			return r, false, 0, nil
		}
		return 0, false, time.Duration(-r) * time.Millisecond, nil
	case []any:
		if len(r) == 1 {
			if f, ok := r[0].(int64); ok {
				return f, true, 0, nil
			}
		}
	}
	return 0, false, 0, errors.New("unexpected acquire reply")
}

// turnGrace is how long a released lock stays reserved for the waiting
// Locker whose turn it is; past it, anyone may take the lock.
const turnGrace = 100 * time.Millisecond

var turnGraceArg any = strconv.FormatInt(turnGrace.Microseconds(), 10)

func (s single) release(ctx context.Context, k *lockKeys, owner string, fenceWindow any) (int64, error) {
	return releaseScript.Run(ctx, s.c, k.both[:], owner, turnGraceArg, fenceWindow).Int64()
}

func (s single) pttl(ctx context.Context, k *lockKeys, owner string) (time.Duration, error) {
	n, err := pttlScript.Run(ctx, s.c, k.both[:1], owner).Int64()
	if err != nil {
		return 0, err
	}
	if n == -3 {
		return 0, ErrNotHeld
	}
	if n < 0 {
		n = 0
	}
	return time.Duration(n) * time.Millisecond, nil
}

// renew sends the batch in one round trip. On a plain client (a master or
// a Sentinel failover client) it is one script call for up to renewChunk
// leases; on a sharded client (Cluster, Ring) the keys of one script must
// share a slot, so leases are grouped by hash tag and the groups pipelined.
func (s single) renew(ctx context.Context, batch []renewal) {
	var groups [][]int // indexes into batch, one script call each
	if _, plain := s.c.(*redis.Client); plain {
		all := make([]int, len(batch))
		for i := range all {
			all[i] = i
		}
		groups = append(groups, all)
	} else {
		byTag := map[string]int{}
		for i := range batch {
			tag := hashTag(batch[i].keys.hash())
			g, ok := byTag[tag]
			if !ok {
				g = len(groups)
				byTag[tag] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
	}
	run := func(useSha bool) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(groups))
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for gi, g := range groups {
				keys := make([]string, len(g))
				args := make([]any, 0, 2*len(g))
				for j, i := range g {
					keys[j] = batch[i].keys.hash()
					args = append(args, batch[i].ownerArg, batch[i].ttlArg)
				}
				if useSha {
					cmds[gi] = renewScript.EvalSha(ctx, p, keys, args...)
				} else {
					cmds[gi] = renewScript.Eval(ctx, p, keys, args...)
				}
			}
			return nil
		})
		return cmds
	}
	cmds := run(true)
	for _, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmds = run(false) // the script cache was flushed (restart, failover): send the source once
			break
		}
	}
	for gi, c := range cmds {
		held, err := c.Int64Slice()
		if err == nil && len(held) != len(groups[gi]) {
			err = errors.New("unexpected renew reply")
		}
		for j, i := range groups[gi] {
			batch[i].err = err
			batch[i].held = err == nil && held[j] == 1
		}
	}
}

// hashTag returns the part of a key that Redis Cluster hashes.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
