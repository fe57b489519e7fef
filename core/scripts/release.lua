-- release: undo one hold of owner ARGV[1] on lock KEYS[1]; the last one
-- deletes the lock and publishes on its channel (named like the key).
-- Returns the holds left (0 = released), or -1 when the owner holds nothing.
local c = redis.call('HGET', KEYS[1], ARGV[1])
if c == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1], 'r')
  return 0
end
if not c then return -1 end
return redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
