-- acquire: take the lock KEYS[1] for owner ARGV[1]. Safe to run twice (a
-- client re-sends a command whose reply came late): the same call again
-- finds its own owner and answers the same fence, and a late copy of a call
-- whose hold has already been given up finds the owner's done marker and
-- takes nothing.
-- KEYS[1] lock hash {owner = <owner>, fence = F[, next = <locker>]}
-- KEYS[2] fence key: "F" (the last fence issued for this name), or after a
--         release with waiters "F|<reserved locker>|<until µs>|<then locker>"
-- KEYS[3] this owner's done marker (see release.lua)
-- ARGV[1] owner, ARGV[2] TTL ms, ARGV[3] fence window ms,
-- ARGV[4] this Locker's id when the caller will wait ("" for TryLock)
-- Returns F (> 0) when ARGV[1] holds the lock, -(ms to wait) (<= 0) when
-- busy (the holder's remaining TTL, or the time left of another Locker's
-- turn), or nil when this owner's hold already ended.
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if v[1] == ARGV[1] then
  return tonumber(v[2])
end
if v[1] then
  -- Busy. A caller that will wait claims the next turn if nobody has.
  if ARGV[4] ~= '' then
    redis.call('HSETNX', KEYS[1], 'next', ARGV[4])
  end
  local t = redis.call('PTTL', KEYS[1])
  if t < 0 then t = 0 end
  return -t
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return false
end
-- Free: the fence is the server clock in microseconds, kept strictly above
-- the last fence issued for this name while that one is remembered.
-- (Fences stay below 2^53: exact as Lua numbers and as integer strings.)
local now = redis.call('TIME')
local f = now[1] * 1000000 + now[2]
local old = redis.call('SET', KEYS[2], f, 'PX', ARGV[3], 'GET')
local nxt
if old and string.find(old, '|', 1, true) then
  -- The last release handed the turn to a waiting Locker.
  local last, res, untl, after = string.match(old, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if res ~= ARGV[4] and tonumber(untl) > f then
    -- Another Locker's turn: put it back, queue behind it, stay away.
    if after == '' then after = ARGV[4] end
    redis.call('SET', KEYS[2], last .. '|' .. res .. '|' .. untl .. '|' .. after, 'PX', ARGV[3])
    return -math.max(1, math.floor((tonumber(untl) - f) / 1000))
  end
  if after ~= '' and after ~= ARGV[4] then nxt = after end
  old = last
end
if old and tonumber(old) >= f then
  f = tonumber(old) + 1
  redis.call('SET', KEYS[2], f, 'PX', ARGV[3])
end
if nxt then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', f, 'next', nxt)
else
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', f)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return f
