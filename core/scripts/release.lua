#!lua flags=allow-oom
-- release: give up owner ARGV[1]'s hold on lock KEYS[1]. Safe to run twice:
-- the release leaves a done marker for the owner (KEYS[3], for ARGV[4] ms:
-- longer than the client can take to re-send a call), so a copy of this
-- call answers the same, and a late copy of the owner's acquire takes
-- nothing. The release publishes on the lock's channel (named like the key)
-- to wake waiters; if a waiting Locker claimed the next turn, its turn is
-- kept in the fence key KEYS[2] for ARGV[2] µs.
-- It runs when Redis is at maxmemory (allow-oom): it frees more than the
-- small marker it writes.
-- ARGV[3] fence window ms.
-- Returns 0 when the owner's hold is (now, or already) released, -1 when
-- the owner did not hold the lock.
local v = redis.call('HMGET', KEYS[1], 'owner', 'next', 'fence')
if v[1] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
  if v[2] then
    local now = redis.call('TIME')
    local untl = now[1] * 1000000 + now[2] + tonumber(ARGV[2])
    redis.call('SET', KEYS[2], v[3] .. '|' .. v[2] .. '|' .. string.format('%.0f', untl) .. '|', 'PX', ARGV[3])
  end
  redis.call('PUBLISH', KEYS[1], 'r')
  return 0
end
local m = redis.call('GET', KEYS[3])
if m == '1' then return 0 end
if not m then
  redis.call('SET', KEYS[3], '0', 'PX', ARGV[4])
end
return -1
