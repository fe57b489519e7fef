#!lua flags=allow-oom
-- rlock release: give up reader ARGV[1]'s hold on lock KEYS[1], or its
-- place in the queue. Keys, arguments, done markers and answers as
-- release.lua's (ForceRelease aside). Once no reader holds, the lock goes
-- to the first live waiter in this call (see handOn in rw.lua); a free
-- lock that nobody waits for is deleted.
local owner = ARGV[1]
local now, ms = clock()
local v = redis.call('HMGET', KEYS[1], 'owner', 'r')
local live, mine = 0, nil
if v[2] and not v[1] then
  local _
  live, _, mine = holders(ms, owner)
end
local out = leave(owner, mine)
if mine then live = live - 1 end
-- (neither owner nor r, yet a hash: a writer's lean hold, or a leftover,
-- which is none: see leanHolder in queue.lua)
if not v[1] and (v[2] or not leanHolder()) then
  local writer = false
  if redis.call('EXISTS', KEYS[4]) == 1 then
    live, writer = handOn(now, ms, ARGV[2], live, true)
  end
  if live == 0 and not writer then
    redis.call('DEL', KEYS[1])
  end
end
return out
