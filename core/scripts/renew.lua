-- renew: extend lock KEYS[1] to ARGV[2] ms if owner ARGV[1] still holds it.
-- The expiry only grows (GT), so a shorter lease of the same owner never cuts
-- a longer one short. Returns 1 when held, 0 when not.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return 1
end
return 0
