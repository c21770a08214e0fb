-- draw_enter.lua: open a voucher's draw to entries, enter it (one entry per user, only in the
-- window), or read one's entry.
-- KEYS[1] entries  hash  u:<userID> -> entry id; ~open ('p:<ms>' being opened since ms, 'ok'
--                        open: the record knows), ~frozen ('1': entries closed), ~n (how many
--                        entered)
-- ARGV[1] 'open', 'confirm', 'enter' or 'read', ARGV[2] userID, ARGV[3] opens_ms (begin -
-- prequeue), ARGV[4] begin_ms, ARGV[5] a fresh random entry id (used only for a new entry),
-- ARGV[6] expire_at_ms (when the key goes).
-- Opening takes three steps, so that entries lost from Redis are told from entries not opened
-- yet: 'open' marks the entries 'p' unless marked (code 5 when this call made the mark, 6 when
-- another opener's 'p' is there, entry_id then how many ms ago it was made; 1 when open already);
-- the opener that made the mark records the opening in PostgreSQL and 'confirm's ('p' -> 'ok';
-- code 4 when the mark is gone). Only the maker of a mark records an opening, so a maker who finds
-- the opening recorded already has found the entries lost (its own mark replaced a lost one).
-- Returns {code, entries, now_ms, entry_id}: code 1 entered (now or before; entry_id theirs) or
-- open; 0 not entered; 2 the window has not opened; 3 the window has closed (begin_at reached or
-- the entries frozen); 4 the entries are not open ('enter': the caller opens them and tries again;
-- 'confirm': the mark is gone); 5 and 6 as above.
-- Server time only: the window is judged by Redis TIME, never by the caller's clock.
-- No value that decides the draw's outcome is here: that comes from a beacon round signed
-- after begin_at.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(redis.call('HGET', KEYS[1], '~n') or '0')
if ARGV[1] == 'open' then
  if now < tonumber(ARGV[3]) then return {2, 0, now, ''} end
  local mark = redis.call('HGET', KEYS[1], '~open')
  if mark == 'ok' then return {1, n, now, ''} end
  if mark then return {6, n, now, tostring(now - tonumber(string.sub(mark, 3)))} end
  redis.call('HSET', KEYS[1], '~open', 'p:' .. now)
  redis.call('HSET', KEYS[1], '~n', 0)
  redis.call('PEXPIREAT', KEYS[1], ARGV[6])
  return {5, 0, now, ''}
end
if ARGV[1] == 'confirm' then
  if redis.call('HEXISTS', KEYS[1], '~open') == 0 then return {4, 0, now, ''} end
  redis.call('HSET', KEYS[1], '~open', 'ok')
  return {1, n, now, ''}
end
local field = 'u:' .. ARGV[2]
local id = redis.call('HGET', KEYS[1], field)
if id then return {1, n, now, id} end
if ARGV[1] == 'read' then return {0, n, now, ''} end
if now < tonumber(ARGV[3]) then return {2, 0, now, ''} end
if now >= tonumber(ARGV[4]) or redis.call('HGET', KEYS[1], '~frozen') == '1' then
  return {3, n, now, ''}
end
if redis.call('HGET', KEYS[1], '~open') ~= 'ok' then return {4, 0, now, ''} end
redis.call('HSET', KEYS[1], field, ARGV[5])
n = redis.call('HINCRBY', KEYS[1], '~n', 1)
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
return {1, n, now, ARGV[5]}
