#!lua flags=allow-oom
-- release: give up owner ARGV[1]'s hold on lock KEYS[1], or its place in
-- the lock's queue. The lock goes straight to the first live waiter, in this
-- call: its hold (owner, a new fence), living until its queue entry would
-- have expired, which it then claims for its whole TTL; and it is told on the
-- lock's channel (KEYS[1]: SPUBLISH "g <waiter> <fence> <seq> <ms>", ms the
-- hold's first lifetime, which the other waiters note as the holder's TTL;
-- the waiter's tag, if its entry has one, becomes the hold's field t).
-- Nothing is published when no one waits; when only waiters that do not
-- queue wait (Redlock's), "f" tells them the lock is free. Safe to run twice: the release leaves a done
-- marker for the owner (KEYS[3], for ARGV[3] ms: longer than the client can
-- take to re-send a call), so a copy of this call answers the same, and a late
-- copy of the owner's acquire does nothing. It runs when Redis is at
-- maxmemory (allow-oom): it frees more than the small marker it writes.
-- KEYS[2] fence key, KEYS[4] waiters (zset), KEYS[5] waiters' entries (hash).
-- ARGV[2] fence window ms.
-- ARGV[4] "force" (ForceRelease, an operator's): remove ARGV[1]'s hold only if
-- it holds the lock now — no done marker of an earlier release counts, the
-- queue is not touched otherwise — and mark the hold as ended without a
-- release of its own ('0'), so that the owner's own Unlock reports not held.
-- Returns 0 when the owner's hold is (now, or already) released, -1 when the
-- owner did not hold the lock (it only left the queue, if it was in it).
local v = redis.call('HMGET', KEYS[1], 'owner', 'w')
if v[1] ~= ARGV[1] and ARGV[4] == 'force' then return -1 end
if v[1] ~= ARGV[1] then
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  local m = redis.call('GET', KEYS[3])
  if m == '1' then return 0 end
  if not m then
    redis.call('SET', KEYS[3], '0', 'PX', ARGV[3])
  end
  return -1
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[3], ARGV[4] == 'force' and '0' or '1', 'PX', ARGV[3])
if not v[2] then return 0 end -- no one joined the queue while it was held
-- The first live waiter, in batches of 16; the dead ones before it and the
-- one granted leave the queue.
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
for batch = 1, 4 do
  local ws = redis.call('ZRANGE', KEYS[4], 0, 15)
  if #ws == 0 then break end
  local es = redis.call('HMGET', KEYS[5], unpack(ws))
  for i, w in ipairs(ws) do
    local exp, seq, tag
    if es[i] then exp, seq, tag = string.match(es[i], '^(%d+)|(%d+)|?(.*)$') end
    if exp and tonumber(exp) > ms then
      redis.call('ZREM', KEYS[4], unpack(ws, 1, i))
      redis.call('HDEL', KEYS[5], unpack(ws, 1, i))
      local f = now[1] * 1000000 + now[2]
      local old = redis.call('GET', KEYS[2])
      if old and tonumber(old) >= f then f = tonumber(old) + 1 end
      redis.call('SET', KEYS[2], f, 'PX', ARGV[2])
      if redis.call('EXISTS', KEYS[4]) == 1 then
        redis.call('HSET', KEYS[1], 'owner', w, 'fence', f, 'w', '1')
      else
        redis.call('HSET', KEYS[1], 'owner', w, 'fence', f)
      end
      if tag ~= '' then redis.call('HSET', KEYS[1], 't', tag) end
      redis.call('PEXPIREAT', KEYS[1], exp)
      redis.call('SPUBLISH', KEYS[1], 'g ' .. w .. ' ' .. string.format('%.0f', f) .. ' ' .. seq .. ' ' .. (tonumber(exp) - ms))
      return 0
    end
  end
  redis.call('ZREM', KEYS[4], unpack(ws))
  redis.call('HDEL', KEYS[5], unpack(ws))
end
-- No live waiter in the queue, yet someone waited: waiters that do not
-- queue (Redlock's) are told the lock is free.
redis.call('SPUBLISH', KEYS[1], 'f')
return 0
