#!lua
-- fence: raise the fence floor KEYS[1] (of the lock's slot) to ARGV[1] unless it is already at
-- least that, kept ARGV[2] ms (the fence window). A Redlock holder's fence is
-- the largest its majority issued; made the floor of each of their fence
-- floors, the next holder's majority, which shares a node with this one, issues
-- a larger one. The lock hash KEYS[2], while ARGV[3] owns it, answers that
-- fence from then on (a quorum of nodes then names the lease's own fence,
-- whatever a straggler issued later). Safe to run twice. Returns the fence
-- floor's value after.
local v = redis.call('HMGET', KEYS[2], 'owner', ARGV[3])
if v[1] == ARGV[3] then
  redis.call('HSET', KEYS[2], 'fence', ARGV[1])
elseif v[2] then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) -- a lean hold (see acquire.lua)
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local f = tonumber(ARGV[1])
if cur < f then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return f
end
return cur
