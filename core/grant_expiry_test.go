package core_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// plantDead puts expired entries ARGV[1] to ARGV[2] in the queue of lock
// KEYS[1] (zset KEYS[4], entries KEYS[5]).
const plantDead = `
local z, e = {}, {}
for j = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  z[#z + 1] = j
  z[#z + 1] = 'dead:' .. j
  e[#e + 1] = 'dead:' .. j
  e[#e + 1] = '1|1'
end
redis.call('ZADD', KEYS[4], unpack(z))
redis.call('HSET', KEYS[5], unpack(e))
return #e / 2
`

// plantBrink puts behind them one live entry, of owner "brink:owner", that
// ends ARGV[1] ms from now: the next acquire sweeps the expired ones for
// longer than that before it grants the brink entry.
const plantBrink = `
local t = redis.call('TIME')
local exp = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1])
redis.call('ZADD', KEYS[4], 1e9, 'brink:owner')
redis.call('HSET', KEYS[5], 'brink:owner', exp .. '|1')
return exp
`

// A grant to a waiter whose entry ends while the call that grants it runs
// (it swept a long queue of expired entries first) leaves the lock with an
// expiry, never a hash that lives forever: Redis 7.0 deletes a key at once
// when an absolute expiry set on it has passed, and the waiting caller's
// HSET of w that follows would recreate it without one. An entry with 5 ms
// left is planted behind 50 000 expired ones, and the acquire sent in the
// same MULTI, so its 5 ms are spent in the sweep. On one server and on a
// 3-master Cluster. Control: grant-at-expiry (the absolute expiry) leaves
// such a hash.
func TestGrantAtEntryEndKeepsAnExpiry(t *testing.T) {
	t.Parallel()
	onSingleAndCluster(t, func(t *testing.T, c redis.UniversalClient) {
		l := locktest.Locker(t, c)
		for _, mutant := range []string{"", "grant-at-expiry"} {
			name := "brink:" + t.Name() + ":" + mutant
			junk := grantAtEntryEnd(t, c, core.FenceFloorKey(l, name), name, mutant)
			if mutant != "" {
				if !junk {
					t.Fatal("control: with the absolute expiry, the lock was not left without one")
				}
				continue
			}
			if junk {
				t.Fatal("the grant at its entry's end left the lock hash without an expiry")
			}
			// The name is free again for the next caller.
			s, err := l.Lock(locktest.Context(t), name)
			if err != nil {
				t.Fatalf("Lock after the grant lapsed = %v", err)
			}
			if err := s.Unlock(locktest.Context(t)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// grantAtEntryEnd plants the expired entries on name's queue, then the
// brink entry and one waiter's acquire in one MULTI; it reports whether
// the lock was left a hash without expiry.
func grantAtEntryEnd(t *testing.T, c redis.UniversalClient, floor, name, mutant string) bool {
	t.Helper()
	ctx := locktest.Context(t)
	src, err := core.MutantScriptSource("acquire", mutant)
	if err != nil {
		t.Fatal(err)
	}
	lock := locktest.RedisKey(name)
	keys := []string{lock, floor, lock + ":done:waiter:owner", lock + ":q", lock + ":qt"}
	plant := func() {
		for i := 1; i <= 50000; i += 1000 {
			if err := c.Eval(ctx, plantDead, keys, i, i+999).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	plant()
	// The sweep of 50 000 entries takes longer than the test servers'
	// clients wait for a reply (1s) on a loaded machine.
	slow := patientClient(t, c)
	var acq *redis.Cmd
	for try := 1; ; try++ {
		_, err = slow.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Eval(ctx, plantBrink, keys, 5)
			// A waiting caller (entry life 5000 ms, refresh number 1).
			acq = p.Eval(ctx, src, keys, "waiter:owner", 10000, 600000, 5000, 1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := acq.Int64()
		if n <= 0 {
			break
		}
		// A server descheduled for 5 ms between the two scripts (a loaded
		// machine): the waiter took the lock; put the dead entries back
		// (the sweep dropped them) and try again.
		if try == 3 {
			t.Fatalf("probe: the waiter took the lock (fence %d) 3 times: the brink entry had ended before the sweep", n)
		}
		c.Del(ctx, lock)
		plant()
	}
	if c.ZScore(ctx, lock+":q", "brink:owner").Err() != redis.Nil {
		t.Fatal("probe: the brink entry is still queued: it was not granted")
	}
	pttl := c.PTTL(ctx, lock).Val()
	t.Logf("%s mutant=%q: acquire answered %v; the lock's PTTL after: %v", name, mutant, acq.Val(), pttl)
	junk := pttl == -1
	c.Del(ctx, lock, lock+":q", lock+":qt")
	return junk
}

// patientClient is a client of c's server(s) that waits 30s for a reply.
func patientClient(t *testing.T, c redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var p redis.UniversalClient
	switch c := c.(type) {
	case *redis.Client:
		o := *c.Options()
		o.ReadTimeout = 30 * time.Second
		p = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		o.ReadTimeout = 30 * time.Second
		p = redis.NewClusterClient(&o)
	default:
		t.Fatalf("client %T", c)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
