-- queue_admit.lua: one admission step of a voucher's waiting room, run by any instance at any
-- time: the room's admission clock (room.t) makes several instances together admit the rate,
-- not the rate times the instances.
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome, [5] claims, [6] journal,
-- [7] stock meta.
-- ARGV[1] begin_ms, ARGV[2] admit per second, ARGV[3] pass lifetime ms, ARGV[4] the units that
-- can still be bought, as the stock told before this step (-1: no bound), ARGV[5] at most this
-- many admitted by this call, ARGV[6] '1' closes the room for good, ARGV[7] expire_at_ms,
-- ARGV[8] the room's landed count (room.landed) as some step read it before ARGV[4] was read,
-- ARGV[9] the grace ms of a missed turn (0: a missed pass expires at once, as before grace).
-- Returns {head, now_ms, waiting, admitted_now, expired_now, closed, sold_out, sold_out_changed,
-- landed, pass_expiry_ms, back_now, requeued_now, user...}; head is -1 while the room is lost
-- (queue_join.lua, KEYS[7]): nothing is admitted until it is restored. landed is room.landed now:
-- the ARGV[8] of a later step whose stock is read after this one. The users are those this step
-- gave a pass (the held who came back first, then the line's), whose turn came (Room.step
-- announces each).
--
-- Grace (see queue_join.lua for the marks): a first pass missed is held, not expired: the member
-- 'h:<user>' of passes scored 2^44 + held_until, its unit going to the next in line as an expired
-- pass's does. A held shopper who reads the place within the grace gets a fresh pass at once when
-- the last step left spare units (room.spare), else is marked back ('b:<user>', scored 2^45 +
-- held_until) and this step admits them first, within the bound and outside the rate (their turn
-- came already). A hold whose grace ended goes to the back of the line once ('r:<user>', outcome
-- 'r'); a pass missed after a hold, or after the requeue, expires for good. Held places reserve no
-- unit: with most passes missed, the units go on to the line instead of waiting out the grace.
--
-- The bound: unused passes, plus claims whose reservation may not be in ARGV[4] yet, never
-- outnumber ARGV[4]. Those claims are the ones in flight and the ones settled after ARGV[8]
-- (queue_pass.lua): a claim settled before ARGV[8] was read had its reservation in the stock
-- before ARGV[4] was read. A claim settled since may be counted twice (in the stock and here),
-- which only holds an admission back until the next step. Should a settled claim above ARGV[8]
-- be forgotten already (room.gone: the caller's landed count is older than the claims kept),
-- the step admits nobody; its answer's landed makes the next step exact.
--
-- sold_out: a bound of 0 (ARGV[4]: no stock left, every unit held or sold) marks the room sold
-- out (room.soldout), and any other bound clears the mark. Those still waiting keep their places
-- and read sold_out (queue_join.lua); units that come back (a hold timed out, a cancel, a failed
-- order, stock added) raise the bound again, and admission resumes in line order, at most as
-- many at once as the units back. sold_out_changed is 1 when this step set or cleared the mark,
-- so exactly one instance announces the change.
--
-- head counts the admitted: the first head members of the line by rank. Places never move once
-- admission began (later joiners score above every earlier one), so a waiter's position is
-- rank - head + 1 and nothing per waiter is written when the head moves.
-- The clock t starts at begin_ms and moves by 1000/rate per admission, so
-- floor((now - t) * rate / 1000) more may enter: the total admitted by time now is
-- floor((now - begin) * rate / 1000), whichever instances ran the steps. An expired pass moves
-- t back by one step: its place goes to the next in line. Credit not used (empty line, bound
-- reached, no step run) is kept for at most one second, so an idle room does not release a burst later.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 0 then return {-1, now, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
if ARGV[6] == '1' then redis.call('HSET', KEYS[2], 'closed', '1') end
local closed = redis.call('HGET', KEYS[2], 'closed') == '1'
local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
local size = redis.call('ZCARD', KEYS[1])
local begin = tonumber(ARGV[1])
local landed = tonumber(redis.call('HGET', KEYS[2], 'landed') or '0')
if now < begin then return {head, now, size - head, 0, 0, 0, 0, 0, landed, 0, 0, 0} end
-- A draw being seated (queue_seat.lua, slice by slice) admits nobody until its last slice is in.
if redis.call('HEXISTS', KEYS[2], 'seat_next') == 1 then return {head, now, size - head, 0, 0, 0, 0, 0, landed, 0, 0, 0} end
-- A room nobody stepped for over a second (its voucher paused: the admitters skip it; or every
-- gateway down) stood still: its passes' lifetimes move on by the stop, so nobody admitted loses
-- the turn to a wait in which they could not buy. room.at is the last step's time;
-- queue_join.lua and queue_pass.lua read an expiry the same way until this step writes it.
local last = tonumber(redis.call('HGET', KEYS[2], 'at') or '0')
if not closed and last > 0 and now - last > 1000 then
  local out = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  for i = 1, #out, 2 do
    redis.call('ZADD', KEYS[3], string.format('%.0f', tonumber(out[i + 1]) + now - last), out[i])
  end
end
redis.call('HSET', KEYS[2], 'at', now)
local max = tonumber(ARGV[5])
local grace = tonumber(ARGV[9] or '0')
local heldBand, backBand = 17592186044416, 35184372088832 -- 2^44, 2^45: above every pass expiry
local goneWith = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
local gone, final = {}, 0
for i = 1, #goneWith, 2 do
  local u = goneWith[i]
  gone[#gone + 1] = u
  local o = redis.call('HGET', KEYS[4], u)
  if grace > 0 and not closed and not o then
    redis.call('HSET', KEYS[4], u, 'h')
    redis.call('ZADD', KEYS[3], string.format('%.0f', heldBand + tonumber(goneWith[i + 1]) + grace), 'h:' .. u)
    redis.call('HINCRBY', KEYS[2], 'held', 1)
  elseif grace > 0 and not closed and o == 'g' then
    -- A fresh pass after a hold missed too: the place goes to the back of the line (below).
    redis.call('ZADD', KEYS[3], string.format('%.0f', heldBand + now), 'h:' .. u)
  else
    redis.call('HSET', KEYS[4], u, 'x')
    final = final + 1
  end
end
if #gone > 0 then redis.call('ZREM', KEYS[3], unpack(gone)) end
if final > 0 then redis.call('HINCRBY', KEYS[2], 'expired', final) end
if closed then
  -- The sale is over: held places end with it.
  local held = redis.call('ZRANGEBYSCORE', KEYS[3], string.format('%.0f', heldBand), '+inf', 'LIMIT', 0, max)
  for _, m in ipairs(held) do
    redis.call('ZREM', KEYS[3], m)
    redis.call('HSET', KEYS[4], string.sub(m, 3), 'x')
  end
  redis.call('PEXPIREAT', KEYS[2], ARGV[7])
  return {head, now, 0, 0, #gone, 1, 0, 0, landed, 0, 0, 0}
end
-- Holds whose grace ended, returned or not: each place goes to the back of the line, once.
local requeued = 0
for _, band in ipairs({heldBand, backBand}) do
  local over = redis.call('ZRANGEBYSCORE', KEYS[3], string.format('%.0f', band), string.format('%.0f', band + now), 'LIMIT', 0, max)
  for _, m in ipairs(over) do
    local u = string.sub(m, 3)
    redis.call('ZREM', KEYS[3], m)
    local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
    redis.call('ZADD', KEYS[1], string.format('%.0f', 4503599627370496 + seq), 'r:' .. u)
    redis.call('HSET', KEYS[4], u, 'r')
    requeued = requeued + 1
  end
end
if requeued > 0 then size = redis.call('ZCARD', KEYS[1]) end
local bound = tonumber(ARGV[4])
local wasSoldOut = redis.call('HGET', KEYS[2], 'soldout') == '1'
local soldOut = bound == 0
if soldOut and not wasSoldOut then
  redis.call('HSET', KEYS[2], 'soldout', '1')
elseif wasSoldOut and not soldOut then
  redis.call('HDEL', KEYS[2], 'soldout')
end
local changed = 0
if soldOut ~= wasSoldOut then changed = 1 end
local so = 0
if soldOut then so = 1 end
-- claimed settles the claims in flight past their deadline (their gateway died mid-buy), forgets
-- settled claims older than keep ms, and counts the claims whose reservation the stock figure
-- read after the landed count since may lack; math.huge when some of those are forgotten already.
local inflight = 4503599627370496
local keep = 5000
local function claimed(since)
  -- string.format: a Lua number passed to Redis is written with 14 digits, too few for 2^52 + ms.
  local late = redis.call('ZRANGEBYSCORE', KEYS[5], string.format('%.0f', inflight),
    string.format('%.0f', inflight + now), 'LIMIT', 0, max)
  for _, c in ipairs(late) do
    redis.call('ZREM', KEYS[5], c)
    local n = redis.call('HINCRBY', KEYS[2], 'landed', 1)
    redis.call('ZADD', KEYS[5], n, n .. ':' .. now)
  end
  for _ = 1, max do
    local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    if #first == 0 or tonumber(first[2]) >= inflight then break end
    local at = tonumber(string.match(first[1], ':(%d+)$'))
    if at > now - keep then break end
    redis.call('ZREMRANGEBYRANK', KEYS[5], 0, 0)
    redis.call('HSET', KEYS[2], 'gone', first[2])
  end
  if tonumber(redis.call('HGET', KEYS[2], 'gone') or '0') > since then return math.huge end
  return redis.call('ZCOUNT', KEYS[5], '(' .. since, '+inf')
end
local step = 1000 / tonumber(ARGV[2])
local clock = tonumber(redis.call('HGET', KEYS[2], 't') or ARGV[1]) - #gone * step
-- A room nobody stepped for a while (every instance down, or the first step long after
-- begin_at) gets at most one second of credit, not a burst of everything it missed.
if clock < now - 1000 - #gone * step then clock = now - 1000 - #gone * step end
local n = math.floor((now - clock) / step)
if n < 0 then n = 0 end
local k = math.min(n, size - head, max)
local inFlight = claimed(tonumber(ARGV[8]))
-- room: the passes the bound lets out now (unused passes, below the held band, count against it).
local room = 1000000000
if bound >= 0 then
  room = math.max(0, bound - redis.call('ZCOUNT', KEYS[3], '-inf', '(' .. string.format('%.0f', heldBand)) - inFlight)
end
local exp = string.format('%.0f', now + tonumber(ARGV[3]))
local turns = {}
-- The held who came back first: their turn came already, so the rate does not charge them.
local back = {}
if room > 0 then
  back = redis.call('ZRANGEBYSCORE', KEYS[3], string.format('%.0f', backBand), '+inf', 'LIMIT', 0, math.min(room, max))
end
for _, m in ipairs(back) do
  local u = string.sub(m, 3)
  redis.call('ZREM', KEYS[3], m)
  redis.call('ZADD', KEYS[3], exp, u)
  redis.call('HSET', KEYS[4], u, 'g')
  turns[#turns + 1] = u
end
room = room - #back
k = math.min(k, room)
if k > 0 then
  local who = redis.call('ZRANGE', KEYS[1], head, head + k - 1)
  local args = {}
  for i, m in ipairs(who) do
    -- A place back in line ('r:<user>') is its user's second turn.
    local u = m
    if string.sub(m, 1, 2) == 'r:' then u = string.sub(m, 3) end
    args[2 * i - 1] = exp
    args[2 * i] = u
    who[i] = u
    turns[#turns + 1] = u
  end
  redis.call('ZADD', KEYS[3], unpack(args))
  head = head + k
  redis.call('HSET', KEYS[2], 'head', head)
end
if #turns > 0 and KEYS[6] then redis.call('RPUSH', KEYS[6], 'a:' .. exp .. ':' .. table.concat(turns, ',')) end
-- spare: units this step could have let out and did not; a held shopper who comes back before the
-- next step takes one at once (queue_join.lua), never more than this step saw.
redis.call('HSET', KEYS[2], 'spare', string.format('%.0f', math.max(0, room - math.max(k, 0))))
clock = clock + k * step
if k < n and clock < now - 1000 then clock = now - 1000 end
redis.call('HSET', KEYS[2], 't', string.format('%.3f', clock))
for i = 1, math.min(#KEYS, 6) do redis.call('PEXPIREAT', KEYS[i], ARGV[7]) end
landed = tonumber(redis.call('HGET', KEYS[2], 'landed') or '0')
local out = {head, now, size - head, k, #gone, 0, so, changed, landed, tonumber(exp), #back, requeued}
-- User ids as strings: a Lua number would lose the digits of an id above 2^53.
for _, u in ipairs(turns) do out[#out + 1] = u end
return out
