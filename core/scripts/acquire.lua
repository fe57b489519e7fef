#!lua
-- acquire: take the lock KEYS[1] for owner ARGV[1], or, busy, queue for it.
-- Safe to run twice (a client re-sends a command whose reply came late): the
-- same call again finds its own owner and answers the same fence, and a late
-- copy of a call whose hold (or wait) has already been given up finds the
-- owner's done marker and does nothing.
-- KEYS[1] lock hash {owner = <owner>, fence = F, w = 1 when the queue may
--         hold waiters (set by them), so a release without it skips the queue}
-- KEYS[2] fence key: F, the last fence issued for this name
-- KEYS[3] this owner's done marker (see release.lua)
-- KEYS[4] waiters in arrival order (zset: owner → server µs at joining)
-- KEYS[5] waiters' entries (hash: owner → "<expiry ms>|<seq>")
-- ARGV[1] owner, ARGV[2] TTL ms, ARGV[3] fence window ms,
-- ARGV[4] how long a waiter's entry lives, ms ("" for a single attempt: never
--         queue; "n" for a waiter that does not queue but is to be told when
--         the lock is free, as Redlock's are), ARGV[5] the waiter's refresh number
-- ARGV[6] (only when the Locker has a tag function) the caller's holder tag
--         ("" for none): stored with the hold (field t) and the queue entry
--         ("<expiry ms>|<seq>|<tag>"), and a busy answer carries the holder's.
-- Returns F (> 0) when ARGV[1] holds the lock (taken now, taken by an earlier
-- copy, or granted to it as a waiter by the last release: then claimed for the
-- whole TTL), -(ms to wait) (<= 0) when busy or when live waiters are ahead
-- (busy with ARGV[6] given: {-(ms to wait), holder's tag or ""}), or nil when
-- this owner's hold or wait has already ended.
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'w')
if v[1] == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return tonumber(v[2])
end
-- The common case, a free lock with no marker and no queue, costs one
-- EXISTS for both; either present costs one more to tell which.
local queued = false
if redis.call('EXISTS', KEYS[3], KEYS[4]) > 0 then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return false
  end
  queued = true
end
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
local function join()
  if ARGV[4] ~= '' and ARGV[4] ~= 'n' then
    redis.call('ZADD', KEYS[4], 'NX', now[1] * 1000000 + now[2], ARGV[1])
    local e = (ms + tonumber(ARGV[4])) .. '|' .. ARGV[5]
    if ARGV[6] and ARGV[6] ~= '' then e = e .. '|' .. ARGV[6] end
    redis.call('HSET', KEYS[5], ARGV[1], e)
    redis.call('PEXPIRE', KEYS[4], 2 * tonumber(ARGV[4]) + tonumber(ARGV[2]))
    redis.call('PEXPIRE', KEYS[5], 2 * tonumber(ARGV[4]) + tonumber(ARGV[2]))
  end
end
if v[1] then
  join()
  if ARGV[4] ~= '' and not v[3] then
    -- w: someone may wait, so the holder's release looks at the queue.
    redis.call('HSET', KEYS[1], 'w', '1')
  end
  local t = redis.call('PTTL', KEYS[1])
  if t < 0 then t = 0 end
  if ARGV[6] then
    return {-t, redis.call('HGET', KEYS[1], 't') or ''}
  end
  return -t
end
-- Free. First come, first served: a live waiter that arrived earlier goes
-- first (a single attempt never jumps the queue either); expired entries of
-- waiters that are gone are dropped on the way.
if queued then
  -- In batches of 16: the first live entry that is not ours wins; the dead
  -- ones before it are dropped.
  for batch = 1, 4 do
    local heads = redis.call('ZRANGE', KEYS[4], 0, 15)
    if #heads == 0 then break end
    local es = redis.call('HMGET', KEYS[5], unpack(heads))
    local dead = {}
    local ours = false
    for i, head in ipairs(heads) do
      if head == ARGV[1] then ours = true break end
      local exp = es[i] and tonumber(string.match(es[i], '^(%d+)'))
      if exp and exp > ms then
        if #dead > 0 then
          redis.call('ZREM', KEYS[4], unpack(dead))
          redis.call('HDEL', KEYS[5], unpack(dead))
        end
        join()
        return -math.max(1, exp - ms)
      end
      dead[#dead + 1] = head
    end
    if #dead > 0 then
      redis.call('ZREM', KEYS[4], unpack(dead))
      redis.call('HDEL', KEYS[5], unpack(dead))
    end
    if ours or #heads < 16 then break end
    if batch == 4 then return -1 end -- more dead entries: the next attempt goes on
  end
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  queued = redis.call('EXISTS', KEYS[4]) == 1
end
-- The fence is the server clock in microseconds, kept strictly above the
-- last fence issued for this name while that one is remembered. (Fences stay
-- below 2^53: exact as Lua numbers and as integer strings.)
local f = now[1] * 1000000 + now[2]
local old = redis.call('SET', KEYS[2], f, 'PX', ARGV[3], 'GET')
if old and tonumber(old) >= f then
  f = tonumber(old) + 1
  redis.call('SET', KEYS[2], f, 'PX', ARGV[3])
end
if queued then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', f, 'w', '1')
else
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', f)
end
if ARGV[6] and ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 't', ARGV[6])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return f
