#!lua flags=no-writes
-- semaphore pttl: the remaining life in ms of owner ARGV[1]'s permit of
-- semaphore KEYS[1], or -3 when it holds none.
local v = redis.call('HGET', KEYS[1], ARGV[1])
local exp = v and tonumber(string.match(v, '^(%d+)|'))
if not exp then return -3 end
local t = redis.call('TIME')
local left = exp - (t[1] * 1000 + math.floor(t[2] / 1000))
if left <= 0 then return -3 end
return left
