#!lua flags=allow-oom
-- semaphore release: give up owner ARGV[1]'s permit of semaphore KEYS[1],
-- or its place in the queue; a permit that frees goes straight to the first
-- live waiter, in this call. Done markers as in release.lua: with ARGV[3]
-- > 0 the release leaves one for the owner (KEYS[3], ARGV[3] ms), so that a
-- copy of this call answers the same and frees nothing more, and a late
-- copy of the owner's acquire does nothing; with "0" it writes and reads
-- none. Once no permit is held and no one waits, the holders' hash is
-- deleted. ARGV[2] fence window ms.
-- Returns 0 when the owner's permit is (now, or already) released, -1 when
-- the owner held none (it only left the queue, if it was in it).
local owner = ARGV[1]
local now, ms = clock()
local live, n, mine = holders(ms, owner)
local out = leave(owner, mine)
if mine then live = live - 1 end
local queued = redis.call('EXISTS', KEYS[4]) == 1
if queued then
  -- The holders' count, or, every permit expired with the holders' hash,
  -- the count the waiters passed.
  n = n or tonumber(redis.call('HGET', KEYS[5], '#n'))
  if n then
    live, queued = pass(live, n, now, ms, ARGV[2])
  end
end
if live == 0 and not queued then
  redis.call('DEL', KEYS[1])
end
return out
