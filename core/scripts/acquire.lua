#!lua
-- acquire: take the lock KEYS[1] for owner ARGV[1], or, busy, queue for it.
-- Safe to run twice (a client re-sends a command whose reply came late): the
-- same call again finds its own owner and answers the same fence, and a late
-- copy of a call whose hold (or wait) has already been given up finds the
-- owner's done marker and does nothing.
-- KEYS[1] lock hash {owner = <owner>, fence = F, w = 1 when the queue may
--         hold waiters (set by them), so a release without it skips the
--         queue, t = the holder's tag}, or its readers' (see rw.lua); or,
--         lean, {<owner> = F}: a hold taken with no one waiting and no tag,
--         which its holder releases with a plain HDEL of its own field. A
--         waiter that joins turns it into the full form first (full
--         below), so that HDEL then finds nothing and the release script
--         hands the lock on.
-- KEYS[2] the fence floor of the lock's slot: the last fence issued there
-- KEYS[3] this owner's done marker (see release.lua)
-- KEYS[4], KEYS[5] the queue (see queue.lua)
-- ARGV[1] owner, ARGV[2] TTL ms, ARGV[3] fence window ms,
-- ARGV[4] how long a waiter's entry lives, ms ("" for a single attempt: never
--         queue; "n" for a waiter that does not queue but is to be told when
--         the lock is free, as Redlock's are), ARGV[5] the waiter's refresh number
-- ARGV[6] (only when the Locker has a tag function) the caller's holder tag
--         ("" for none): stored with the hold (field t) and the queue entry,
--         and a busy answer carries the holder's.
-- ARGV[7] (only from Redlock, with ARGV[6] given) the Locker's proposed
--         fence: issued when this server's clock and the slot's floor are
--         behind it, so that a majority issues one fence; counted at most
--         100ms ahead of this server's clock, so that a fence outlives no
--         fence floor by more than a window (at least 1s) would cover
-- Returns F (> 0) when ARGV[1] holds the lock (taken now, taken by an earlier
-- copy, or granted to it as a waiter: then claimed for the whole TTL),
-- -(ms to wait) (<= 0) when busy or when live waiters are ahead (busy with
-- ARGV[6] given: {-(ms to wait), holder's tag or ""}), or nil when this
-- owner's hold or wait has already ended. A free lock whose queue has a live
-- waiter is granted to that waiter here, as a release would have.
local owner = ARGV[1]
-- take makes owner the holder under a new fence, and returns the fence.
local function take(now, queued)
  local least = ARGV[7] and math.min(tonumber(ARGV[7]), now[1] * 1000000 + now[2] + 100000)
  local f = fence(now, ARGV[3], least)
  local tag = ARGV[6] and ARGV[6] ~= ''
  if not queued and not tag then
    redis.call('HSET', KEYS[1], owner, f)
  else
    if queued then
      redis.call('HSET', KEYS[1], 'owner', owner, 'fence', f, 'w', '1')
    else
      redis.call('HSET', KEYS[1], 'owner', owner, 'fence', f)
    end
    if tag then redis.call('HSET', KEYS[1], 't', ARGV[6]) end
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return f
end
-- The common case, a free lock with no marker and no queue, costs one
-- EXISTS before it is taken.
local n = redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4])
if n == 0 then
  return take(clock(), false)
end
-- (shared functions)
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'w', 't', 'r', owner)
if v[1] == owner or v[6] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return tonumber(v[2] or v[6])
end
-- lean: another owner's lean hold (the hash's only field). A hash that is
-- no hold at all is a leftover: the lock is free.
local lean = false
if not v[1] and not v[5] then
  local o, f, junk = leanHolder()
  if o then
    v[1], v[2], lean = o, f, true
  elseif junk then
    redis.call('DEL', KEYS[1])
    n = n - 1
  end
end
-- A marker or a queue is there: one more EXISTS tells which.
local queued = false
if n > ((v[1] or v[5]) and 1 or 0) then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return false
  end
  queued = true
end
local now, ms = clock()
-- wait queues the caller behind the holder (w: someone may wait, so the
-- holder's release looks at the queue) and answers busy.
local function wait(t, tag)
  join(now, ms, false, ARGV[6])
  if ARGV[4] ~= '' and lean then
    full(v[1], v[2])
  elseif ARGV[4] ~= '' and not v[3] then
    redis.call('HSET', KEYS[1], 'w', '1')
  end
  return busy(t, tag, 6)
end
if v[1] then
  return wait(redis.call('PTTL', KEYS[1]), v[4])
end
if v[5] then
  -- Readers (RLock's, see rw.lua) hold it while any of theirs is live.
  local live, _, _, _, tag = holders(ms, owner)
  if live > 0 then
    return wait(redis.call('PTTL', KEYS[1]), tag)
  end
  redis.call('DEL', KEYS[1])
end
-- Free. First come, first served: a live waiter that arrived earlier goes
-- first (a single attempt never jumps the queue either), and gets the lock
-- now (readers at the head all do); expired entries of waiters that are
-- gone are dropped on the way.
if queued then
  local w, exp, seq, tag, r, more = head(ms)
  if w == false then return busy(1, nil, 6) end
  if w and w ~= owner then
    if r then
      give(w, exp, seq, tag, now, ms, ARGV[3], 'r', '1')
      handOn(now, ms, ARGV[3], 1, false)
    else
      grant(w, exp, seq, tag, more, now, ms, ARGV[3])
    end
    join(now, ms, false, ARGV[6])
    if ARGV[4] ~= '' then
      -- w: the new holder's release looks at the queue (grant set it only
      -- if others were still queued then)
      redis.call('HSET', KEYS[1], 'w', '1')
    end
    return busy(exp - ms, tag, 6)
  end
  queued = false
  if w then
    redis.call('ZREM', KEYS[4], owner)
    redis.call('HDEL', KEYS[5], owner)
    queued = more
  end
end
return take(now, queued)
