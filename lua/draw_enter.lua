-- draw_enter.lua: enter a voucher's draw (one entry per user, only in the window), or read one's
-- entry. Whichever call comes first once the window is open also sets the draw's secret seed.
-- KEYS[1] meta     hash  seed (hex, set once), frozen ('1': entries closed), drawn, cutoff, winners
-- KEYS[2] entries  set   userID
-- ARGV[1] 'enter', 'read' or 'open' (only set the seed), ARGV[2] userID, ARGV[3] opens_ms
-- (begin - prequeue), ARGV[4] begin_ms, ARGV[5] a fresh random seed (hex; used only if none is
-- set), ARGV[6] expire_at_ms (when the keys go).
-- Returns {code, entries, now_ms}: code 1 entered (now or before), 0 not entered, 2 the window
-- has not opened, 3 the window has closed (begin_at reached or the draw frozen the entries).
-- Server time only: the window is judged by Redis TIME, never by the caller's clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(ARGV[3]) then
  if redis.call('HSETNX', KEYS[1], 'seed', ARGV[5]) == 1 then
    redis.call('PEXPIREAT', KEYS[1], ARGV[6])
  end
end
local user = ARGV[2]
local entered = ARGV[1] ~= 'open' and redis.call('SISMEMBER', KEYS[2], user) == 1
if ARGV[1] == 'enter' and not entered then
  if now < tonumber(ARGV[3]) then return {2, 0, now} end
  if now >= tonumber(ARGV[4]) or redis.call('HGET', KEYS[1], 'frozen') == '1' then
    return {3, redis.call('SCARD', KEYS[2]), now}
  end
  redis.call('SADD', KEYS[2], user)
  redis.call('PEXPIREAT', KEYS[2], ARGV[6])
  entered = true
end
local code = 0
if entered then code = 1 end
return {code, redis.call('SCARD', KEYS[2]), now}
