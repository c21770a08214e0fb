-- queue_seat.lua: seat a draw's ranking in a voucher's waiting room, once: every entrant takes
-- the place of their rank, the first `winners` are admitted at once with passes, and the rest
-- wait in rank order for units to come back (queue_admit.lua admits them as it admits a line).
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome, [5] claims (not touched),
-- [6] journal, [7] stock meta.
-- ARGV[1] pass lifetime ms, ARGV[2] winners, ARGV[3] expire_at_ms, ARGV[4..] user ids, best
-- rank first.
-- Returns {seated_now, winners, now_ms, size}: seated_now 1 when this call seated the ranking;
-- 0 when one was seated before (winners and size are then that one's: however many drawers race,
-- the room is seated once); -1 while the room is lost (queue_join.lua, KEYS[7]).
-- room.drawn keeps the winners of the seated draw; places are the ranks 0..size-1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 0 then return {-1, 0, now, 0} end
local before = redis.call('HGET', KEYS[2], 'drawn')
local size = redis.call('ZCARD', KEYS[1])
if before then return {0, tonumber(before), now, size} end
-- A line already there (restored after a Redis data loss, which took room.drawn with it) was
-- seated before: it stands.
local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
if size > 0 or head > 0 then return {0, head, now, size} end
local n = #ARGV - 3
local w = math.min(tonumber(ARGV[2]), n)
local exp = string.format('%.0f', now + tonumber(ARGV[1]))
local i = 1
while i <= n do
  local places, passes, journal = {}, {}, {}
  local j = i
  while j <= n and j < i + 500 do
    local u = ARGV[3 + j]
    places[#places + 1] = j - 1
    places[#places + 1] = u
    if j <= w then
      passes[#passes + 1] = exp
      passes[#passes + 1] = u
    end
    journal[#journal + 1] = 'j:' .. u .. ':' .. (j - 1)
    j = j + 1
  end
  redis.call('ZADD', KEYS[1], unpack(places))
  if #passes > 0 then redis.call('ZADD', KEYS[3], unpack(passes)) end
  if KEYS[6] then redis.call('RPUSH', KEYS[6], unpack(journal)) end
  if KEYS[6] and #passes > 0 then
    local who = {}
    for k = 2, #passes, 2 do who[#who + 1] = passes[k] end
    redis.call('RPUSH', KEYS[6], 'a:' .. exp .. ':' .. table.concat(who, ','))
  end
  i = j
end
redis.call('HSET', KEYS[2], 'drawn', w, 'head', w, 't', now, 'at', now)
for k = 1, math.min(#KEYS, 6) do
  if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIREAT', KEYS[k], ARGV[3]) end
end
return {1, w, now, n}
