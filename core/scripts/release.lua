-- release: undo one hold of owner ARGV[1] on lock KEYS[1]. The last one
-- deletes the lock and publishes on its channel (named like the key) to
-- wake waiters; if a waiting Locker claimed the next turn, its turn is kept
-- in the fence key for ARGV[2] µs.
-- KEYS[2] fence key, ARGV[3] fence window ms.
-- Returns the holds left (0 = released), or -1 when the owner holds nothing.
local v = redis.call('HMGET', KEYS[1], ARGV[1], 'next', 'fence')
if v[1] == '1' then
  redis.call('DEL', KEYS[1])
  if v[2] then
    local now = redis.call('TIME')
    local untl = now[1] * 1000000 + now[2] + tonumber(ARGV[2])
    redis.call('SET', KEYS[2], v[3] .. '|' .. v[2] .. '|' .. string.format('%.0f', untl) .. '|', 'PX', ARGV[3])
  end
  redis.call('PUBLISH', KEYS[1], 'r')
  return 0
end
if not v[1] then return -1 end
return redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
