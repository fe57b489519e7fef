#!lua
-- rlock acquire: take the lock KEYS[1] shared, for reader ARGV[1], or,
-- while a writer holds it or a live writer waits ahead, queue for it (a
-- reader's entry: see queue.lua; readers: see rw.lua). Keys, arguments and
-- answers as acquire.lua's: F (> 0) when ARGV[1] holds a read lock (taken
-- now, by an earlier copy of this call, or granted to it as a waiter: then
-- claimed for the whole TTL), -(ms to wait) when busy (with ARGV[6]:
-- {-(ms), holder's tag or ""}), nil when this owner's hold or wait has
-- already ended (its done marker, see rlock_release.lua). Safe to run twice.
local owner = ARGV[1]
local v = redis.call('HMGET', KEYS[1], 'owner', 'w', 't', 'r', 'fence')
local lean = false
if not v[1] and not v[4] then
  -- a writer's lean hold (see acquire.lua), or nothing
  local o, f = leanHolder() -- (a leftover is no holder: holders skips it)
  if o then
    v[1], v[5], lean = o, f, true
  end
end
local now, ms = clock()
local live, mine, soonTag = 0, nil, ''
if not v[1] then
  local _
  live, _, mine, _, soonTag = holders(ms, owner)
  if mine then return claim(owner, mine, ms) end
end
local extra = redis.call('EXISTS', KEYS[3], KEYS[4])
if extra > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  return false
end
-- wait queues the caller behind a holder (w: its release looks at the
-- queue) and answers busy.
local function wait(t, tag, marked)
  join(now, ms, true, ARGV[6])
  if ARGV[4] ~= '' and lean then
    full(v[1], v[5])
  elseif ARGV[4] ~= '' and not marked then
    redis.call('HSET', KEYS[1], 'w', '1')
  end
  return busy(t, tag, 6)
end
if v[1] then
  return wait(redis.call('PTTL', KEYS[1]), v[3], v[2])
end
-- No writer holds. First come, first served: the readers at the head of
-- the queue (they came earlier) go in with the caller; a live writer at the
-- head is not overtaken, and gets the lock now if no reader holds it.
if extra > 0 then
  local taking = false -- the caller was at the head
  while true do
    local w, exp, seq, tag, r, more = head(ms)
    if w == false then return busy(1, nil, 6) end
    if not w then break end
    if w == owner then
      redis.call('ZREM', KEYS[4], owner)
      redis.call('HDEL', KEYS[5], owner)
      taking = true
    elseif r then
      give(w, exp, seq, tag, now, ms, ARGV[3], 'r', '1')
      live = live + 1
    elseif taking then
      break
    elseif live > 0 then
      return wait(redis.call('PTTL', KEYS[1]), soonTag, v[2])
    else
      redis.call('DEL', KEYS[1]) -- expired readers' leftovers, if any
      grant(w, exp, seq, tag, more, now, ms, ARGV[3])
      return wait(exp - ms, tag, more)
    end
  end
end
local f = fence(now, ARGV[3])
local exp = ms + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], owner, permit(exp, f, ARGV[6]), 'r', '1')
last(exp, ms)
return f
