-- draw_enter.lua: open a voucher's draw to entries, enter it (one entry per user, only in the
-- window), or read one's entry.
-- KEYS[1] entries  hash  u:<userID> -> entry id; ~open (ms the entries opened), ~frozen ('1':
--                        entries closed), ~n (how many entered)
-- ARGV[1] 'open', 'enter' or 'read', ARGV[2] userID, ARGV[3] opens_ms (begin - prequeue),
-- ARGV[4] begin_ms, ARGV[5] a fresh random entry id (used only for a new entry), ARGV[6]
-- expire_at_ms (when the key goes), ARGV[7] '1' when 'open' may mark the entries open (the
-- record says they opened just now); otherwise a missing mark means the entries were lost.
-- Returns {code, entries, now_ms, entry_id}: code 1 entered (now or before; entry_id theirs) or,
-- for 'open', open; 0 not entered; 2 the window has not opened; 3 the window has closed
-- (begin_at reached or the entries frozen); 4 the entries are not open: lost (for 'open') or
-- not opened yet (for 'enter': the caller opens them and tries again).
-- Server time only: the window is judged by Redis TIME, never by the caller's clock.
-- No value that decides the draw's outcome is here: that comes from a beacon round signed
-- after begin_at.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(redis.call('HGET', KEYS[1], '~n') or '0')
if ARGV[1] == 'open' then
  if now < tonumber(ARGV[3]) then return {2, 0, now, ''} end
  if redis.call('HEXISTS', KEYS[1], '~open') == 1 then return {1, n, now, ''} end
  if ARGV[7] ~= '1' then return {4, 0, now, ''} end
  redis.call('HSET', KEYS[1], '~open', now, '~n', 0)
  redis.call('PEXPIREAT', KEYS[1], ARGV[6])
  return {1, 0, now, ''}
end
local field = 'u:' .. ARGV[2]
local id = redis.call('HGET', KEYS[1], field)
if id then return {1, n, now, id} end
if ARGV[1] == 'read' then return {0, n, now, ''} end
if now < tonumber(ARGV[3]) then return {2, 0, now, ''} end
if now >= tonumber(ARGV[4]) or redis.call('HGET', KEYS[1], '~frozen') == '1' then
  return {3, n, now, ''}
end
if redis.call('HEXISTS', KEYS[1], '~open') == 0 then return {4, 0, now, ''} end
redis.call('HSET', KEYS[1], field, ARGV[5])
n = redis.call('HINCRBY', KEYS[1], '~n', 1)
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
return {1, n, now, ARGV[5]}
