#!lua flags=no-writes
-- pttl: the remaining TTL in ms of lock KEYS[1] if owner ARGV[1] holds it,
-- else -3. A lean hold (see acquire.lua) is a field named by its owner.
local v = redis.call('HMGET', KEYS[1], 'owner', ARGV[1])
if v[1] == ARGV[1] or v[2] then
  return redis.call('PTTL', KEYS[1])
end
return -3
