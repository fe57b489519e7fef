#!lua flags=no-writes
-- inspect: what Redis knows of lock KEYS[1] (KEYS[2] its waiters' entries),
-- read only. Returns {owner or "", fence or 0, PTTL ms, server time s, µs,
-- live waiters, holder tag or "", live readers}. Waiters are the entries
-- that have not expired; over 1000 entries the count is of entries, live
-- or not. Readers (RLock's, see rw.lua) are counted the same way, and
-- their PTTL is the longest-lived live reader's (the hash's own may be
-- longer: one that left).
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 't', 'r')
-- (shared functions)
if not v[1] and not v[4] then
  v[1], v[2] = leanHolder() -- a lean hold (see acquire.lua), or no hold
end
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
local readers = 0
local pttl = redis.call('PTTL', KEYS[1])
if v[4] and not v[1] then
  readers = redis.call('HLEN', KEYS[1]) - 1
  if readers <= 1000 then
    readers = 0
    local last = ms
    local all = redis.call('HGETALL', KEYS[1])
    for i = 1, #all, 2 do
      local exp = #all[i] > 1 and tonumber(string.match(all[i + 1], '^(%d+)|'))
      if exp and exp > ms then
        readers = readers + 1
        if exp > last then last = exp end
      end
    end
    pttl = last - ms
  end
end
local n = redis.call('HLEN', KEYS[2])
if n > 0 and n <= 1000 then
  local live = 0
  for _, e in ipairs(redis.call('HVALS', KEYS[2])) do
    local exp = tonumber(string.match(e, '^(%d+)'))
    if exp and exp > ms then live = live + 1 end
  end
  n = live
end
return {v[1] or '', tonumber(v[2]) or 0, pttl, tonumber(now[1]), tonumber(now[2]), n, v[3] or '', readers}
