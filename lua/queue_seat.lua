-- queue_seat.lua: seat one slice of a draw's ranking in a voucher's waiting room. The ranking is
-- seated once, slice after slice in rank order, so that no call blocks Redis for long: every
-- entrant takes the place of their rank, the first `winners` are admitted with passes, and the
-- rest wait in rank order for units to come back (queue_admit.lua admits them as it admits a line).
-- Any number of drawers may send slices at once: a slice is written only if it starts where the
-- seating stands (room.seat_next), so each is written exactly once, and a drawer that died halfway
-- is taken over by whoever sends the next slice.
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome, [5] claims (not touched),
-- [6] journal, [7] stock meta.
-- ARGV[1] pass lifetime ms, ARGV[2] winners, ARGV[3] expire_at_ms, ARGV[4] the slice's first rank
-- (0-based), ARGV[5] the ranking's size, ARGV[6..] the slice's user ids, best rank first.
-- Returns {code, winners, now_ms, size, next}: code 1 this call seated the last slice (the
-- ranking is seated now); 0 a ranking was seated before (winners and size are that one's);
-- 2 the slice does not start where the seating stands: nothing written, send the slice at next;
-- 3 the slice was seated, send the one at next; -1 while the room is lost (queue_join.lua, KEYS[7]).
-- room.drawn keeps the winners of the seated draw; places are the ranks 0..size-1. The first
-- slice fixes the winners, the size and the passes' expiry (seat_w, seat_n, seat_exp) for all.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 0 then return {-1, 0, now, 0, 0} end
local before = redis.call('HGET', KEYS[2], 'drawn')
local size = redis.call('ZCARD', KEYS[1])
if before then return {0, tonumber(before), now, size, size} end
local cursor = redis.call('HGET', KEYS[2], 'seat_next')
if not cursor then
  -- A line already there (restored after a Redis data loss, which took room.drawn with it) was
  -- seated before: it stands.
  local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
  if size > 0 or head > 0 then return {0, head, now, size, size} end
  local n = tonumber(ARGV[5])
  redis.call('HSET', KEYS[2], 'seat_next', 0, 'seat_w', math.min(tonumber(ARGV[2]), n), 'seat_n', n,
    'seat_exp', string.format('%.0f', now + tonumber(ARGV[1])))
  cursor = 0
end
cursor = tonumber(cursor)
local w = tonumber(redis.call('HGET', KEYS[2], 'seat_w'))
local total = tonumber(redis.call('HGET', KEYS[2], 'seat_n'))
local exp = redis.call('HGET', KEYS[2], 'seat_exp')
if tonumber(ARGV[4]) ~= cursor then return {2, w, now, total, cursor} end
local places, passes, journal = {}, {}, {}
for j = 6, #ARGV do
  local u = ARGV[j]
  local place = cursor + j - 6
  places[#places + 1] = place
  places[#places + 1] = u
  if place < w then
    passes[#passes + 1] = exp
    passes[#passes + 1] = u
  end
  journal[#journal + 1] = 'j:' .. u .. ':' .. place
end
if #places > 0 then redis.call('ZADD', KEYS[1], unpack(places)) end
if #passes > 0 then redis.call('ZADD', KEYS[3], unpack(passes)) end
if KEYS[6] and #journal > 0 then redis.call('RPUSH', KEYS[6], unpack(journal)) end
if KEYS[6] and #passes > 0 then
  local who = {}
  for k = 2, #passes, 2 do who[#who + 1] = passes[k] end
  redis.call('RPUSH', KEYS[6], 'a:' .. exp .. ':' .. table.concat(who, ','))
end
cursor = cursor + #ARGV - 5
for k = 1, math.min(#KEYS, 6) do
  if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIREAT', KEYS[k], ARGV[3]) end
end
if cursor < total then
  redis.call('HSET', KEYS[2], 'seat_next', cursor)
  return {3, w, now, total, cursor}
end
redis.call('HSET', KEYS[2], 'drawn', w, 'head', w, 't', now, 'at', now)
redis.call('HDEL', KEYS[2], 'seat_next', 'seat_w', 'seat_n', 'seat_exp')
return {1, w, now, total, cursor}
