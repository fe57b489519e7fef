-- rw: a lock's readers (RLock's holders), shared by the lock's scripts and
-- rlock_*.lua (spliced in after queue.lua and semaphore.lua). Readers hold
-- the lock hash KEYS[1] as a semaphore's holders hold theirs: owner →
-- "<expiry ms>|<fence>[|<tag>]", each expiring on its own, with r = 1
-- marking the hash as the readers' (a writer's has owner, fence and t
-- instead; w, "someone may wait", is either's). The hash lives as long as
-- its longest-lived reader.

-- handOn hands the lock, which no writer holds (readers live readers do),
-- to the head of its queue: every reader at the head, up to the first
-- writer, and that writer when no reader holds by then (dirty: the hash
-- may hold expired readers' leftovers, deleted first). It returns the
-- readers holding after, whether a writer got the lock, and the last head
-- answer (nil: no live waiter).
local function handOn(now, ms, window, readers, dirty)
  while true do
    local w, exp, seq, tag, r, more = head(ms)
    if not w then return readers, false, w end
    if r then
      give(w, exp, seq, tag, now, ms, window, 'r', '1')
      readers = readers + 1
    elseif readers > 0 then
      return readers, false, w
    else
      if dirty then redis.call('DEL', KEYS[1]) end
      grant(w, exp, seq, tag, more, now, ms, window)
      return 0, true, w
    end
  end
end
