-- queue: the lock's FIFO of waiters, shared by the lock and semaphore
-- scripts (spliced in at their "shared functions" line, after their fast
-- path: a function defined costs Redis a closure every call, so the common
-- case defines none it does not use). KEYS[1] the lock hash, KEYS[2] the
-- fence floor of its slot, KEYS[4] the waiters in arrival order (zset: owner → server µs
-- at joining), KEYS[5] their entries (hash: owner → "<expiry ms>|<refresh
-- number>[r][|<tag>]"; r marks a reader, an RLock's waiter).

-- keep makes the queue's keys live until at least exp (ms), the expiry of
-- an entry that lives life ms: never shorter than the longest-lived entry,
-- whatever the TTLs of later joiners. When it moves the expiry it moves it
-- one life further, so that the refreshes and joins of that life do not.
local function keep(exp, life)
  if redis.call('PEXPIRETIME', KEYS[4]) < exp then
    redis.call('PEXPIREAT', KEYS[4], exp + life)
    redis.call('PEXPIREAT', KEYS[5], exp + life)
  end
end

-- full turns owner o's lean hold (KEYS[1] = {o = fence f}, see acquire.lua)
-- into the full form, with w set, keeping its expiry: someone waits now, so
-- the holder's plain HDEL must find nothing and its release script hand the
-- lock on.
local function full(o, f)
  redis.call('HSET', KEYS[1], 'owner', o, 'fence', f, 'w', '1')
  redis.call('HDEL', KEYS[1], o)
end

-- leanHolder reads lock hash KEYS[1], which has neither owner nor r: the
-- owner and fence of a lean hold (see acquire.lua), or, when it is none,
-- nil and whether anything is there. A lean hold's hash has one field,
-- named by its owner; owner ids are longer than every field name of the
-- full form, so a leftover of it (an older version's lone w, say) is never
-- taken for a hold.
local function leanHolder()
  local h = redis.call('HGETALL', KEYS[1])
  if #h == 2 and #h[1] > 5 then return h[1], h[2] end
  return nil, nil, h[1] ~= nil
end

-- head returns the first live waiter (its owner, entry expiry ms, refresh
-- number, tag, whether it is a reader, and whether entries follow it),
-- dropping every expired entry before it, however many (each is dropped
-- once, by whoever meets it); nil when none is live.
local function head(ms)
  local batches, size = math.huge, 100
  while batches > 0 do
    batches = batches - 1
    local ws = redis.call('ZRANGE', KEYS[4], 0, size - 1)
    if #ws == 0 then return nil end
    local es = redis.call('HMGET', KEYS[5], unpack(ws))
    for i, w in ipairs(ws) do
      local exp, seq, r, tag
      if es[i] then exp, seq, r, tag = string.match(es[i], '^(%d+)|(%d+)(r?)|?(.*)$') end
      if exp and tonumber(exp) > ms then
        if i > 1 then
          redis.call('ZREM', KEYS[4], unpack(ws, 1, i - 1))
          redis.call('HDEL', KEYS[5], unpack(ws, 1, i - 1))
        end
        return w, tonumber(exp), seq, tag, r == 'r', i < #ws or #ws == size
      end
    end
    redis.call('ZREM', KEYS[4], unpack(ws))
    redis.call('HDEL', KEYS[5], unpack(ws))
  end
  return false -- (only when the sweep is bounded) more entries to look at
end

-- grant hands the free lock to waiter w (head's answers; more: entries
-- follow it): it leaves the queue and holds the lock under a new fence
-- until its entry would have expired (it then claims its own TTL), and is
-- told on the lock's channel:
-- "g <owner> <fence> <refresh number> <ms it holds it for now>". The grant
-- is in Redis, not only in the message: a waiter that missed the message
-- finds that it holds the lock at its next attempt.
local function grant(w, exp, seq, tag, more, now, ms, window)
  redis.call('ZREM', KEYS[4], w)
  redis.call('HDEL', KEYS[5], w)
  local f = fence(now, window)
  if more then
    redis.call('HSET', KEYS[1], 'owner', w, 'fence', f, 'w', '1')
  else
    redis.call('HSET', KEYS[1], 'owner', w, 'fence', f)
  end
  if tag ~= '' then redis.call('HSET', KEYS[1], 't', tag) end
  -- Relative to now, not PEXPIREAT exp: Redis 7.0 deletes a key at once
  -- when its new expiry has passed, as exp may have while this call swept
  -- the queue, and a later HSET of the same call would make the lock a
  -- hash that never expires.
  redis.call('PEXPIRE', KEYS[1], exp - ms)
  redis.call('SPUBLISH', KEYS[1], 'g ' .. w .. ' ' .. string.format('%.0f', f) .. ' ' .. seq .. ' ' .. (exp - ms))
end

-- join puts owner ARGV[1] in the queue (a reader's entry when reader),
-- unless it is a single attempt (ARGV[4] "") or a waiter that does not
-- queue (ARGV[4] "n", Redlock's). ARGV[5] its refresh number, tag its
-- holder tag (nil or "" for none).
local function join(now, ms, reader, tag)
  if ARGV[4] == '' or ARGV[4] == 'n' then return end
  redis.call('ZADD', KEYS[4], 'NX', now[1] * 1000000 + now[2], ARGV[1])
  local exp = ms + tonumber(ARGV[4])
  local e = exp .. '|' .. ARGV[5]
  if reader then e = e .. 'r' end
  if tag and tag ~= '' then e = e .. '|' .. tag end
  redis.call('HSET', KEYS[5], ARGV[1], e)
  keep(exp, tonumber(ARGV[4]))
end

-- busy is a busy answer: -(t ms to wait), and the holder's tag when the
-- call passed one (the tag argument, ARGV[tagAt]).
local function busy(t, tag, tagAt)
  if t < 0 then t = 0 end
  if ARGV[tagAt] then return {-t, tag or ''} end
  return -t
end
