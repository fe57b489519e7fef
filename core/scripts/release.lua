#!lua flags=allow-oom
-- release: give up owner ARGV[1]'s hold on lock KEYS[1], or its place in
-- the lock's queue. The lock goes straight to the first live waiter, in this
-- call (see grant in queue.lua). Nothing is published when no one waits;
-- when only waiters that do not queue wait (Redlock's), "f" tells them the
-- lock is free. With ARGV[3] > 0 it is safe to run twice: the release leaves
-- a done marker for the owner (KEYS[3], for ARGV[3] ms: longer than a call
-- can stay in flight), so a copy of this call answers the same, and a late
-- copy of the owner's acquire does nothing. The client asks for the marker
-- only when a call of the owner's may have run without its answer; with
-- ARGV[3] = "0" (every call answered: none can still arrive) it writes and
-- reads none. It runs when Redis is at maxmemory (allow-oom): it frees more
-- than the small marker it may write.
-- KEYS[2] the slot's fence floor, KEYS[4], KEYS[5] the queue (see queue.lua).
-- ARGV[2] fence window ms.
-- ARGV[4] "force" (ForceRelease, an operator's): remove ARGV[1]'s hold only if
-- it holds the lock now — no done marker of an earlier release counts, the
-- queue is not touched otherwise — and mark the hold as ended without a
-- release of its own ('0'), so that the owner's own Unlock reports not held.
-- A waiter that leaves a free lock hands it to the next live waiter.
-- Returns 0 when the owner's hold is (now, or already) released, -1 when the
-- owner did not hold the lock (it only left the queue, if it was in it).
-- It releases a lean hold (see acquire.lua) too, though Unlock tries the
-- holder's plain HDEL first.
local v = redis.call('HMGET', KEYS[1], 'owner', 'w', 'r', ARGV[1])
-- The common case, the holder's release with no one waiting, needs none of
-- the queue's functions.
if v[1] == ARGV[1] or v[4] then
  redis.call('DEL', KEYS[1])
  if ARGV[3] ~= '0' then
    redis.call('SET', KEYS[3], ARGV[4] == 'force' and '0' or '1', 'PX', ARGV[3])
  end
  if not v[2] then return 0 end -- no one joined the queue while it was held
end
-- (shared functions)
if v[1] == ARGV[1] then
  local now, ms = clock()
  local readers, writer, w = handOn(now, ms, ARGV[2], 0, false)
  if readers == 0 and not writer and w == nil then
    -- No live waiter in the queue, yet someone waited: waiters that do not
    -- queue (Redlock's) are told the lock is free.
    redis.call('SPUBLISH', KEYS[1], 'f')
  end
  return 0
end
if ARGV[4] == 'force' then return -1 end
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
-- (neither owner nor r, yet a hash: another owner's lean hold, or a
-- leftover, which is none: see leanHolder in queue.lua)
if not v[1] and redis.call('EXISTS', KEYS[4]) == 1 and (v[3] or not leanHolder()) then
  -- A waiter leaves a lock no writer holds (its holder is gone, or
  -- readers hold it): the waiters it held up get it now, as from a
  -- release (a writer's hold replacing what is left in the hash).
  local now, ms = clock()
  local readers = 0
  if v[3] then readers = holders(ms, ARGV[1]) end
  handOn(now, ms, ARGV[2], readers, true)
end
if ARGV[3] == '0' then return -1 end
local m = redis.call('GET', KEYS[3])
if m == '1' then return 0 end
if not m then
  redis.call('SET', KEYS[3], '0', 'PX', ARGV[3])
end
return -1
