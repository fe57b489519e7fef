-- acquire: take the lock KEYS[1] for owner ARGV[1], or re-enter it.
-- KEYS[1] lock hash {fence = F, <owner> = hold count}
-- KEYS[2] last fence issued for this name (string, expires ARGV[3] ms after issue)
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] fence window in ms
-- Returns F (> 0) when newly obtained, {F} when re-entered,
-- or -(holder's remaining TTL in ms) (<= 0) when another owner holds it.
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- Free: the fence is the server clock in microseconds, kept strictly above
  -- the last fence issued for this name while that one is remembered.
  -- (Fences stay below 2^53: exact as Lua numbers and as integer strings.)
  local now = redis.call('TIME')
  local f = now[1] * 1000000 + now[2]
  local last = redis.call('SET', KEYS[2], f, 'PX', ARGV[3], 'GET')
  if last and tonumber(last) >= f then
    f = tonumber(last) + 1
    redis.call('SET', KEYS[2], f, 'PX', ARGV[3])
  end
  redis.call('HSET', KEYS[1], 'fence', f, ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return f
end
local v = redis.call('HMGET', KEYS[1], 'fence', ARGV[1])
if v[2] then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return {tonumber(v[1])}
end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then t = 0 end
return -t
