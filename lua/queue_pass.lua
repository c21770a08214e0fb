-- queue_pass.lua: use an admission pass once (claim), give back a claim whose buy never reached
-- the stock (restore: a 429 or 503 further down the chain must not cost the shopper their turn),
-- or settle a claim whose buy is over (spend: its reservation landed, or the answer was final).
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome, [5] claims, [6] journal,
-- [7] stock meta.
-- ARGV[1] 'claim', 'restore' or 'spend', ARGV[2] userID, ARGV[3] the pass's expiry ms, as signed
-- in it (restore: the expiry claim returned), ARGV[4] the buy's Idempotency-Key ('' for none),
-- ARGV[5] (claim) how long a claim may stay unsettled, ms. The claims zset expires with the room's
-- hash.
-- claim returns {code, expiry ms as stored}: code 1 claimed now (or claimed before with the same
-- Idempotency-Key: the retry of a buy whose answer was lost goes on to the reservation, which
-- replays its first order), 2 used before, 3 expired, 4 not admitted (or a pass this room did
-- not give), 5 lost (queue_join.lua, KEYS[7]); restore returns 1 restored, 0 nothing to restore
-- (or lost: the room's restore rebuilds it); spend returns 1 settled now, 0 nothing in flight.
-- A pass signed before a stop of the room (see queue_admit.lua) expires earlier than stored and
-- still claims: one admission, one claim, whichever of its passes.
-- outcome holds 'u' (used) or 'u:<key>' (used by the buy of that key), 'x' (expired), and the
-- marks of a missed turn (queue_admit.lua's grace): 'h' held, 'g' a fresh pass, 'r' back in line.
--
-- The claims zset keeps a claimed pass counted against the room's bound until its reservation
-- is in the stock (queue_admit.lua), so that the room never lets out more passes than units can
-- still be bought. It holds two kinds of members:
--   'c:<user>' scored 2^52 + deadline ms: a claim in flight, its buy not settled yet; a claim
--              whose gateway died is settled by the admission step at the deadline;
--   '<n>:<ms>' scored n: the n-th claim settled (room.landed counts them), at Redis time ms.
-- A settled claim is still counted by an admission step whose stock figure may have been read
-- before the claim's reservation landed: the step names the room's landed count as it was
-- before that read, and counts the settled claims above it. queue_admit.lua forgets settled
-- claims some seconds old and keeps the highest it forgot in room.gone.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local user = ARGV[2]
local inflight = 4503599627370496
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 0 then
  if ARGV[1] == 'claim' then return {5, 0} end
  return 0
end
if ARGV[1] == 'claim' then
  local stored = redis.call('ZSCORE', KEYS[3], user)
  if not stored then
    local o = redis.call('HGET', KEYS[4], user)
    if o and ARGV[4] ~= '' and o == 'u:' .. ARGV[4] then return {1, 0} end
    if o and string.sub(o, 1, 1) == 'u' then return {2, 0} end
    -- A pass missed and held ('h'), or its place back in line ('r'): that pass expired.
    if o == 'x' or o == 'h' or o == 'r' then return {3, 0} end
    return {4, 0}
  end
  stored = tonumber(stored)
  local exp = stored
  local last = tonumber(redis.call('HGET', KEYS[2], 'at') or '0')
  if redis.call('HGET', KEYS[2], 'closed') ~= '1' and last > 0 and now - last > 1000 then
    exp = exp + now - last -- a stopped room stands still (queue_admit.lua)
  end
  if tonumber(ARGV[3]) > exp then return {4, 0} end
  if exp <= now then return {3, 0} end
  redis.call('ZREM', KEYS[3], user)
  redis.call('ZADD', KEYS[5], string.format('%.0f', inflight + now + tonumber(ARGV[5])), 'c:' .. user)
  local at = redis.call('PEXPIRETIME', KEYS[2])
  if at > 0 then redis.call('PEXPIREAT', KEYS[5], at) end
  local mark = 'u'
  if ARGV[4] ~= '' then mark = 'u:' .. ARGV[4] end
  redis.call('HSET', KEYS[4], user, mark)
  redis.call('HINCRBY', KEYS[2], 'used', 1)
  return {1, stored}
end
if ARGV[1] == 'spend' then
  if redis.call('ZREM', KEYS[5], 'c:' .. user) == 0 then return 0 end
  local n = redis.call('HINCRBY', KEYS[2], 'landed', 1)
  redis.call('ZADD', KEYS[5], n, n .. ':' .. now)
  return 1
end
-- restore: the pass goes back among the unused ones, which the bound counts as it counted the
-- claim, in the same step.
local o = redis.call('HGET', KEYS[4], user)
if o and string.sub(o, 1, 1) == 'u' then
  redis.call('ZREM', KEYS[5], 'c:' .. user)
  redis.call('HDEL', KEYS[4], user)
  redis.call('ZADD', KEYS[3], ARGV[3], user)
  redis.call('HINCRBY', KEYS[2], 'used', -1)
  return 1
end
return 0
