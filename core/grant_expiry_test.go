package core_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// plantBrink fills the queue of lock KEYS[1] (zset KEYS[4], entries
// KEYS[5]) with ARGV[1] expired entries, then one live entry, of owner
// "brink:owner", that ends ARGV[2] ms from now: the next acquire sweeps
// the expired ones for longer than that before it grants the brink entry.
const plantBrink = `
local n = tonumber(ARGV[1])
for i = 1, n, 500 do
  local z, e = {}, {}
  for j = i, math.min(i + 499, n) do
    z[#z + 1] = j
    z[#z + 1] = 'dead:' .. j
    e[#e + 1] = 'dead:' .. j
    e[#e + 1] = '1|1'
  end
  redis.call('ZADD', KEYS[4], unpack(z))
  redis.call('HSET', KEYS[5], unpack(e))
end
local t = redis.call('TIME')
local exp = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[4], n + 1, 'brink:owner')
redis.call('HSET', KEYS[5], 'brink:owner', exp .. '|1')
return exp
`

// A grant to a waiter whose entry ends while the call that grants it runs
// (it swept a long queue of expired entries first) leaves the lock with an
// expiry, never a hash that lives forever: Redis 7.0 deletes a key at once
// when an absolute expiry set on it has passed, and the waiting caller's
// HSET of w that follows would recreate it without one. The queue is
// planted and the acquire sent in one MULTI, so the entry's 5 ms are spent
// in the sweep of 50 000 expired entries. On one server and on a 3-master
// Cluster. Control: grant-at-expiry (the absolute expiry) leaves such a
// hash.
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

// grantAtEntryEnd plants the brink queue on name and sends one waiter's
// acquire in the same MULTI; it reports whether the lock was left a hash
// without expiry.
func grantAtEntryEnd(t *testing.T, c redis.UniversalClient, floor, name, mutant string) bool {
	t.Helper()
	ctx := locktest.Context(t)
	src, err := core.MutantScriptSource("acquire", mutant)
	if err != nil {
		t.Fatal(err)
	}
	lock := locktest.RedisKey(name)
	keys := []string{lock, floor, lock + ":done:waiter:owner", lock + ":q", lock + ":qt"}
	var acq *redis.Cmd
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Eval(ctx, plantBrink, keys, 50000, 5)
		// A waiting caller (entry life 5000 ms, refresh number 1).
		acq = p.Eval(ctx, src, keys, "waiter:owner", 10000, 600000, 5000, 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := acq.Int64(); n > 0 {
		t.Fatalf("probe: the waiter took the lock (fence %d): the brink entry had ended before the sweep", n)
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
