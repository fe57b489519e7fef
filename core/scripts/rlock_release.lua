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
local out = 0
if mine then
  redis.call('HDEL', KEYS[1], owner)
  live = live - 1
  if ARGV[3] ~= '0' then
    redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
  end
else
  redis.call('ZREM', KEYS[4], owner)
  redis.call('HDEL', KEYS[5], owner)
  out = -1
  if ARGV[3] ~= '0' then
    local m = redis.call('GET', KEYS[3])
    if m == '1' then
      out = 0
    elseif not m then
      redis.call('SET', KEYS[3], '0', 'PX', ARGV[3])
    end
  end
end
if not v[1] then
  local writer = false
  if redis.call('EXISTS', KEYS[4]) == 1 then
    live, writer = handOn(now, ms, ARGV[2], live, v[2])
  end
  if live == 0 and not writer and v[2] then
    redis.call('DEL', KEYS[1])
  end
end
return out
