#!lua flags=no-writes
-- pttl: the remaining TTL in ms of lock KEYS[1] if owner ARGV[1] holds it,
-- else -3.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3
