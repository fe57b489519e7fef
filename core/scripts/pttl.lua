-- pttl: the remaining TTL in ms of lock KEYS[1] if owner ARGV[1] holds it,
-- else -3.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PTTL', KEYS[1])
end
return -3
