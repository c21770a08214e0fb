-- queue_join.lua: join a voucher's waiting room, or read one's place in it.
-- KEYS[1] line     zset  userID -> place (random below 2^52 in the pre-queue, 2^52+arrival after begin)
-- KEYS[2] room     hash  head (admitted so far), t (admission clock, ms), at (the last step, ms), seq,
--                        closed, soldout (no stock left: see queue_admit.lua), expired, used,
--                        landed and gone (claims settled, and the last of them forgotten: queue_pass.lua)
-- KEYS[3] passes   zset  userID -> pass expiry ms, for admitted shoppers whose pass is neither used nor expired
-- KEYS[4] outcome  hash  userID -> 'u' or 'u:<Idempotency-Key>' (pass used) | 'x' (pass expired)
-- KEYS[5] claims   zset  passes claimed by a buy whose outcome is not settled, and claims settled
--                        lately (see queue_pass.lua); this script does not touch it
-- KEYS[6] (optional, with KEYS[7]) journal  list  changes not yet copied to PostgreSQL ('j:<user>:<place>', 'a:<expiry ms>:<u1>,<u2>...')
-- KEYS[7] (optional) the voucher's stock meta: while it is missing (Redis lost its data, a repair
--         is under way) the room is being restored and every script answers 'lost'.
-- ARGV[1] 'join', 'read' (the shopper's own) or 'peek' (a server's look: never a return from a
-- hold), ARGV[2] userID, ARGV[3] the user's random pre-queue place (integer
-- below 2^52), ARGV[4] opens_ms (begin - prequeue), ARGV[5] begin_ms, ARGV[6] end_ms,
-- ARGV[7] expire_at_ms (when the room's keys go), ARGV[8] the pass lifetime ms (for a held
-- shopper's fresh pass).
-- Returns {code, rank, head, pass_expiry_ms, now_ms, fresh}; code 0 not in line, 1 waiting,
-- 2 admitted, 3 expired, 4 closed, 5 the line is not open yet, 6 admitted and the pass used,
-- 7 lost (see KEYS[7]), 8 waiting while the room is sold out (the place is kept: units may come
-- back), 9 held (pass_expiry_ms is then the end of the hold). fresh is 1 when this call gave a held
-- shopper their fresh pass (their turn came again). A sold-out room still takes joins: units may
-- come back, and the line decides who gets them.
--
-- Grace (queue_admit.lua): outcome 'h' marks a place held (passes holds 'h:<user>' or, once they
-- came back, 'b:<user>', scored 2^44 or 2^45 plus the end of the hold), 'g' a fresh pass after a
-- hold, 'r' a place back in line once: the line then holds 'r:<user>' too, at the back, and that
-- member's rank is the place. Coming back (a join or a read) within the hold takes one of the units
-- the last step left spare (room.spare, only from a step of the last second), else it marks the
-- shopper back for the next step, which admits them first.
-- Server time only: the window is judged by Redis TIME, never by the caller's clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local user = ARGV[2]
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 0 then return {7, 0, 0, 0, now, 0} end
local closed = redis.call('HGET', KEYS[2], 'closed') == '1' or now >= tonumber(ARGV[6])
if ARGV[1] == 'join' and not redis.call('ZSCORE', KEYS[1], user) then
  if closed then return {4, 0, 0, 0, now, 0} end
  if now < tonumber(ARGV[4]) then return {5, 0, 0, 0, now, 0} end
  local place = ARGV[3]
  if now >= tonumber(ARGV[5]) then
    -- after begin_at: arrival order, behind every pre-queue place (2^52 + sequence).
    local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
    place = string.format('%.0f', 4503599627370496 + seq)
  end
  redis.call('ZADD', KEYS[1], place, user)
  redis.call('PEXPIREAT', KEYS[1], ARGV[7])
  redis.call('PEXPIREAT', KEYS[2], ARGV[7])
  if KEYS[6] then
    redis.call('RPUSH', KEYS[6], 'j:' .. user .. ':' .. place)
    redis.call('PEXPIREAT', KEYS[6], ARGV[7])
  end
end
local rank = redis.call('ZRANK', KEYS[1], user)
if not rank then return {0, 0, 0, 0, now, 0} end
local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
local o = nil
if rank < head then o = redis.call('HGET', KEYS[4], user) end
if o == 'h' then
  if closed then return {3, rank, head, 0, now, 0} end
  local heldBand, backBand = 17592186044416, 35184372088832
  local m, band = 'h:' .. user, heldBand
  local score = redis.call('ZSCORE', KEYS[3], m)
  if not score then m, band = 'b:' .. user, backBand; score = redis.call('ZSCORE', KEYS[3], m) end
  -- No member: the step that ends the hold is under way; it reads held until then.
  if not score then return {9, rank, head, now, now, 0} end
  local untilMs = tonumber(score) - band
  local spare = tonumber(redis.call('HGET', KEYS[2], 'spare') or '0')
  local last = tonumber(redis.call('HGET', KEYS[2], 'at') or '0')
  -- Only the shopper's own join or read is a return; a server's peek leaves the hold as it is.
  if ARGV[1] == 'peek' then return {9, rank, head, untilMs, now, 0} end
  if now < untilMs and spare > 0 and now - last <= 1000 and redis.call('HGET', KEYS[2], 'soldout') ~= '1' then
    local exp = now + tonumber(ARGV[8])
    redis.call('HINCRBY', KEYS[2], 'spare', -1)
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZADD', KEYS[3], string.format('%.0f', exp), user)
    redis.call('HSET', KEYS[4], user, 'g')
    if KEYS[6] then redis.call('RPUSH', KEYS[6], 'a:' .. string.format('%.0f', exp) .. ':' .. user) end
    return {2, rank, head, exp, now, 1}
  end
  if band == heldBand then
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZADD', KEYS[3], string.format('%.0f', backBand + untilMs), 'b:' .. user)
  end
  return {9, rank, head, untilMs, now, 0}
end
if o == 'r' then
  -- Back in line once: the second member is the place.
  local again = redis.call('ZRANK', KEYS[1], 'r:' .. user)
  if again then
    rank, o = again, nil
    if rank < head then o = redis.call('HGET', KEYS[4], user) end
    if o == 'r' then o = nil end
  end
end
if rank < head then
  if o == 'x' then return {3, rank, head, 0, now, 0} end
  if o and string.sub(o, 1, 1) == 'u' then return {6, rank, head, 0, now, 0} end
  local exp = tonumber(redis.call('ZSCORE', KEYS[3], user) or '0')
  -- A room not stepped for over a second stands still (see queue_admit.lua): the pass lives on
  -- by the stop, which the next step writes.
  local last = tonumber(redis.call('HGET', KEYS[2], 'at') or '0')
  if exp > 0 and not closed and last > 0 and now - last > 1000 then exp = exp + now - last end
  return {2, rank, head, exp, now, 0}
end
if closed then return {4, rank, head, 0, now, 0} end
if redis.call('HGET', KEYS[2], 'soldout') == '1' then return {8, rank, head, 0, now, 0} end
return {1, rank, head, 0, now, 0}
