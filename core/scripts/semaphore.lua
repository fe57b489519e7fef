-- semaphore: the holders of a semaphore, shared by semaphore_acquire.lua and
-- semaphore_release.lua (spliced in after queue.lua), and by a lock's
-- readers (rw.lua). KEYS[1] the holders
-- (hash: owner → "<expiry ms>|<fence>[|<tag>]", and n → the permits its
-- holders passed), KEYS[2] the fence floor of its slot, KEYS[4], KEYS[5] its
-- queue (see queue.lua; the entries' hash also keeps, in #n, the permits
-- the waiters passed). Every permit expires on its own; the hash lives as
-- long as its longest-lived permit.

-- permit is a holder's entry.
local function permit(exp, f, tag)
  local e = string.format('%.0f|%.0f', exp, f)
  if tag and tag ~= '' then e = e .. '|' .. tag end
  return e
end

-- holders reads the holders at ms and drops the expired ones. It returns the
-- number of live ones, the permits stored (nil for none), owner's own live
-- entry ({expiry, fence, tag} or nil), and the earliest expiry among the
-- other holders with that holder's tag.
local function holders(ms, owner)
  local all = redis.call('HGETALL', KEYS[1])
  local live, n, mine, soon, soonTag = 0, nil, nil, nil, ''
  local gone = {}
  for i = 1, #all, 2 do
    local k, v = all[i], all[i + 1]
    if #k == 1 then
      -- bookkeeping, not a holder: n (the permits), r and w (a lock's
      -- readers, see rw.lua); owner ids are longer
      if k == 'n' then n = tonumber(v) end
    else
      local exp, f, tag = string.match(v, '^(%d+)|(%d+)|?(.*)$')
      exp = tonumber(exp)
      if not exp or exp <= ms then
        gone[#gone + 1] = k
        if #gone == 1000 then
          redis.call('HDEL', KEYS[1], unpack(gone))
          gone = {}
        end
      else
        live = live + 1
        if k == owner then
          mine = {exp, f, tag}
        elseif not soon or exp < soon then
          soon, soonTag = exp, tag
        end
      end
    end
  end
  if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
  return live, n, mine, soon, soonTag
end

-- last makes the holders' hash live until at least exp (ms; ms is now),
-- counted from now as grant's expiry is (see queue.lua).
local function last(exp, ms)
  if redis.call('PEXPIRETIME', KEYS[1]) < exp then
    redis.call('PEXPIRE', KEYS[1], exp - ms)
  end
end

-- claim answers an acquire of owner, which holds mine (holders' answer):
-- its hold lives the TTL ARGV[2] from now, or longer if it already did
-- (a copy of the call, or a grant claimed), and its fence is the answer.
local function claim(owner, mine, ms)
  local exp = ms + tonumber(ARGV[2])
  if exp > mine[1] then
    redis.call('HSET', KEYS[1], owner, permit(exp, mine[2], mine[3]))
    last(exp, ms)
  end
  return tonumber(mine[2])
end

-- give makes waiter w (head's answers) a holder under a new fence until its
-- entry would have expired (it then claims its own TTL), with field k set
-- to v beside it (n: the permits; r: readers hold), and tells it on the
-- channel as a lock's grant does: "g <owner> <fence> <refresh number> <ms
-- it holds it for now>".
local function give(w, exp, seq, tag, now, ms, window, k, v)
  redis.call('ZREM', KEYS[4], w)
  redis.call('HDEL', KEYS[5], w)
  local f = fence(now, window)
  redis.call('HSET', KEYS[1], w, permit(exp, f, tag), k, v)
  last(exp, ms)
  redis.call('SPUBLISH', KEYS[1], 'g ' .. w .. ' ' .. string.format('%.0f', f) .. ' ' .. seq .. ' ' .. (exp - ms))
end

-- pass hands free permits (n in all, live held) to the live waiters in
-- arrival order, and returns the number held after and whether entries are
-- left in the queue (as head saw it: no command asks again).
local function pass(live, n, now, ms, window)
  local more = true
  while live < n do
    local w, exp, seq, tag, _, rest = head(ms)
    if w == nil then return live, false end
    if not w then return live, true end
    give(w, exp, seq, tag, now, ms, window, 'n', n)
    live, more = live + 1, rest
  end
  return live, more
end

-- leave gives up owner's hold (mine: it holds a live one) or its place in
-- the queue, with the done markers of release.lua (KEYS[3], ARGV[3] ms; "0":
-- none). It returns 0 when the hold is (now, or already) released, -1 when
-- the owner held none.
local function leave(owner, mine)
  if mine then
    redis.call('HDEL', KEYS[1], owner)
    if ARGV[3] ~= '0' then
      redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
    end
    return 0
  end
  redis.call('ZREM', KEYS[4], owner)
  redis.call('HDEL', KEYS[5], owner)
  if ARGV[3] == '0' then return -1 end
  local m = redis.call('GET', KEYS[3])
  if m == '1' then return 0 end
  if not m then
    redis.call('SET', KEYS[3], '0', 'PX', ARGV[3])
  end
  return -1
end
