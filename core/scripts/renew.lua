-- renew: for each i, extend lock KEYS[i] to ARGV[2i] ms if owner ARGV[2i-1]
-- still holds it. The expiry only grows (GT), so a shorter lease of the
-- same owner never cuts a longer one short. Returns one 1 (held) or 0 (not
-- held) per key. On a Cluster all KEYS share one hash slot.
local out = {}
for i = 1, #KEYS do
  if redis.call('HEXISTS', KEYS[i], ARGV[2 * i - 1]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i], 'GT')
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
