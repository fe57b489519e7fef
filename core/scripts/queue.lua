-- queue: the lock's FIFO of waiters, shared by acquire.lua and release.lua
-- (spliced in after their first line). KEYS[1] the lock hash, KEYS[2] the
-- fence floor of its slot, KEYS[4] the waiters in arrival order (zset: owner → server µs
-- at joining), KEYS[5] their entries (hash: owner → "<expiry ms>|<refresh
-- number>[|<tag>]").

-- clock returns the server's time as TIME gives it and in ms.
local function clock()
  local t = redis.call('TIME')
  return t, t[1] * 1000 + math.floor(t[2] / 1000)
end

-- fence issues the next fence: the server clock in µs, kept strictly above
-- the last fence issued in this name's slot while that one is remembered
-- (for window ms after the slot's last acquisition). Fences stay below 2^53: exact as Lua numbers and as strings.
local function fence(now, window)
  local f = now[1] * 1000000 + now[2]
  local old = redis.call('SET', KEYS[2], f, 'PX', window, 'GET')
  if old and tonumber(old) >= f then
    f = tonumber(old) + 1
    redis.call('SET', KEYS[2], f, 'PX', window)
  end
  return f
end

-- keep makes the queue's keys live until at least exp (ms): never shorter
-- than the longest-lived entry, whatever the TTLs of later joiners.
local function keep(exp)
  if redis.call('PEXPIRETIME', KEYS[4]) < exp then
    redis.call('PEXPIREAT', KEYS[4], exp)
    redis.call('PEXPIREAT', KEYS[5], exp)
  end
end

-- head returns the first live waiter (its owner, entry expiry ms, refresh
-- number and tag), dropping every expired entry before it, however many
-- (each is dropped once, by whoever meets it); nil when none is live.
local function head(ms)
  local batches = math.huge
  while batches > 0 do
    batches = batches - 1
    local ws = redis.call('ZRANGE', KEYS[4], 0, 99)
    if #ws == 0 then return nil end
    local es = redis.call('HMGET', KEYS[5], unpack(ws))
    for i, w in ipairs(ws) do
      local exp, seq, tag
      if es[i] then exp, seq, tag = string.match(es[i], '^(%d+)|(%d+)|?(.*)$') end
      if exp and tonumber(exp) > ms then
        if i > 1 then
          redis.call('ZREM', KEYS[4], unpack(ws, 1, i - 1))
          redis.call('HDEL', KEYS[5], unpack(ws, 1, i - 1))
        end
        return w, tonumber(exp), seq, tag
      end
    end
    redis.call('ZREM', KEYS[4], unpack(ws))
    redis.call('HDEL', KEYS[5], unpack(ws))
  end
  return false -- (only when the sweep is bounded) more entries to look at
end

-- grant hands the free lock to waiter w (head's answers): it leaves the
-- queue and holds the lock under a new fence until its entry would have
-- expired (it then claims its own TTL), and is told on the lock's channel:
-- "g <owner> <fence> <refresh number> <ms it holds it for now>". The grant
-- is in Redis, not only in the message: a waiter that missed the message
-- finds that it holds the lock at its next attempt.
local function grant(w, exp, seq, tag, now, ms, window)
  redis.call('ZREM', KEYS[4], w)
  redis.call('HDEL', KEYS[5], w)
  local f = fence(now, window)
  if redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('HSET', KEYS[1], 'owner', w, 'fence', f, 'w', '1')
  else
    redis.call('HSET', KEYS[1], 'owner', w, 'fence', f)
  end
  if tag ~= '' then redis.call('HSET', KEYS[1], 't', tag) end
  redis.call('PEXPIREAT', KEYS[1], exp)
  redis.call('SPUBLISH', KEYS[1], 'g ' .. w .. ' ' .. string.format('%.0f', f) .. ' ' .. seq .. ' ' .. (exp - ms))
end
