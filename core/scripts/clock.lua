-- clock: the server's clock and the fences it issues, shared by every lock
-- script (spliced in after its first line, before its fast path). KEYS[2]
-- the fence floor of the lock's slot.

-- clock returns the server's time as TIME gives it and in ms.
local function clock()
  local t = redis.call('TIME')
  return t, t[1] * 1000 + math.floor(t[2] / 1000)
end

-- fence issues the next fence: the server clock in µs, at least least when
-- given (a Redlock's proposal, see acquire.lua), kept strictly above the
-- last fence issued in this name's slot while that one is remembered (for
-- window ms after the slot's last acquisition). Fences stay below 2^53:
-- exact as Lua numbers and as strings.
local function fence(now, window, least)
  local f = now[1] * 1000000 + now[2]
  if least then f = math.max(f, least) end
  local old = redis.call('SET', KEYS[2], f, 'PX', window, 'GET')
  if old and tonumber(old) >= f then
    f = tonumber(old) + 1
    redis.call('SET', KEYS[2], f, 'PX', window)
  end
  return f
end
