#!lua flags=allow-oom
-- semaphore renew: for each i, extend owner ARGV[2i-1]'s permit of
-- semaphore KEYS[i] to ARGV[2i] ms from now if it still holds a live one.
-- The expiry only grows, so a copy of the call never cuts a permit short.
-- Returns one 1 (held) or 0 (not held) per key. On a Cluster all KEYS share
-- one hash slot.
local t = redis.call('TIME')
local ms = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  local v = redis.call('HGET', KEYS[i], ARGV[2 * i - 1])
  if v then
    local exp, rest = string.match(v, '^(%d+)(|.*)$')
    exp = tonumber(exp)
    if exp and exp > ms then
      local e = ms + tonumber(ARGV[2 * i])
      if e > exp then
        redis.call('HSET', KEYS[i], ARGV[2 * i - 1], string.format('%.0f', e) .. rest)
        if redis.call('PEXPIRETIME', KEYS[i]) < e then
          redis.call('PEXPIREAT', KEYS[i], e)
        end
      end
      out[i] = 1
    end
  end
end
return out
