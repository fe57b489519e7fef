-- The fence check a Script runs before its own body (fence.NewScript).
-- KEYS[1]: the resource's fence record (fence.Key); ARGV[1]: the write's fence.
-- A lower fence than the record's is refused with an error reply naming the
-- record's fence, before anything is written; an equal or higher one is
-- recorded. The body then runs with KEYS and ARGV shifted by one, as its
-- author wrote them.
local recorded = redis.call('GET', KEYS[1])
if recorded and tonumber(recorded) > tonumber(ARGV[1]) then
  return redis.error_reply('LOCKGATE_STALE_FENCE ' .. recorded)
end
if not recorded or tonumber(recorded) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
