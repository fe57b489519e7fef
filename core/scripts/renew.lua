#!lua flags=allow-oom
-- renew: for each i, extend lock KEYS[i] to ARGV[2i] ms if owner ARGV[2i-1]
-- still holds it. The expiry only grows (GT), so a copy of the call, or a
-- shorter lease of the same owner, never cuts a longer one short. It runs
-- when Redis is at maxmemory (allow-oom): it changes expiries only.
-- Returns one 1 (held) or 0 (not held) per key. On a Cluster all KEYS
-- share one hash slot. A lean hold (see acquire.lua) is a field named by its owner.
local out = {}
for i = 1, #KEYS do
  local o = ARGV[2 * i - 1]
  local v = redis.call('HMGET', KEYS[i], 'owner', o)
  if v[1] == o or v[2] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i], 'GT')
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
