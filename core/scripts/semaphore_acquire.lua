#!lua
-- semaphore acquire: take one of the ARGV[6] permits of semaphore KEYS[1]
-- for owner ARGV[1], or, none free, queue for one (the queue is a lock's:
-- see queue.lua; the holders: see semaphore.lua). Safe to run twice as the
-- lock's acquire is: the same call again finds its own owner's permit and
-- answers the same fence; a late copy of a call whose permit (or wait) has
-- been given up finds the owner's done marker and does nothing.
-- KEYS[3] this owner's done marker (see semaphore_release.lua).
-- ARGV[1] owner, ARGV[2] TTL ms, ARGV[3] fence window ms, ARGV[4] how long
-- a waiter's entry lives, ms ("" for a single attempt: never queue),
-- ARGV[5] the waiter's refresh number, ARGV[6] permits, ARGV[7] (only when
-- the Locker has a tag function) the caller's holder tag.
-- Returns F (> 0) when ARGV[1] holds a permit, -(ms until the first permit
-- held expires) when none is free or live waiters are ahead (with ARGV[7]:
-- {-(ms), that holder's tag or ""}), nil when this owner's permit or wait
-- has already ended, or {"p", n} when the holders passed n permits, not
-- ARGV[6] (nothing is changed then).
local owner, n = ARGV[1], tonumber(ARGV[6])
local now, ms = clock()
local live, have, mine, soon, soonTag = holders(ms, owner)
if mine then return claim(owner, mine, ms) end
-- A marker or a queue: one EXISTS for both in the common case (neither).
local extra = redis.call('EXISTS', KEYS[3], KEYS[4])
if extra > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  return false
end
-- The count is the holders' while any hold, else the live waiters' (who
-- passed it when they queued): another count is refused, not mixed in.
if live > 0 and have and have ~= n then
  return {'p', have}
end
if live == 0 and extra > 0 then
  local queued = tonumber(redis.call('HGET', KEYS[5], '#n'))
  if queued and queued ~= n and head(ms) ~= nil then
    return {'p', queued}
  end
end
-- First come, first served: free permits go to live waiters that arrived
-- earlier (a single attempt never jumps the queue either), expired entries
-- are dropped on the way; a caller whose turn comes takes its own, and
-- the live waiters behind it get the other free permits.
local free = n - live
if free > 0 and extra > 0 then
  local own = false
  while free > 0 do
    local w, exp, seq, tag = head(ms)
    if w == false then free = 0 break end
    if not w then break end
    if w == owner then
      redis.call('ZREM', KEYS[4], owner)
      redis.call('HDEL', KEYS[5], owner)
      own = true
    else
      give(w, exp, seq, tag, now, ms, ARGV[3], 'n', n)
      if not soon or exp < soon then soon, soonTag = exp, tag end
    end
    free = free - 1
  end
  if own then free = 1 end
end
if free > 0 then
  local f = fence(now, ARGV[3])
  local exp = ms + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], owner, permit(exp, f, ARGV[7]), 'n', n)
  last(exp, ms)
  return f
end
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[4], 'NX', now[1] * 1000000 + now[2], owner)
  local exp = ms + tonumber(ARGV[4])
  local e = exp .. '|' .. ARGV[5]
  if ARGV[7] and ARGV[7] ~= '' then e = e .. '|' .. ARGV[7] end
  redis.call('HSET', KEYS[5], owner, e, '#n', n)
  keep(exp, tonumber(ARGV[4]))
end
local t = (soon or ms + 1) - ms
if ARGV[7] then return {-t, soonTag or ''} end
return -t
