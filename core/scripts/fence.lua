#!lua
-- fence: raise the fence key KEYS[1] to ARGV[1] unless it is already at
-- least that, kept ARGV[2] ms (the fence window). A Redlock holder's fence is
-- the largest its majority issued; made the floor of each of their fence
-- keys, the next holder's majority, which shares a node with this one, issues
-- a larger one. Safe to run twice. Returns the fence key's value after.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local f = tonumber(ARGV[1])
if cur < f then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return f
end
return cur
