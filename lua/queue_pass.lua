-- queue_pass.lua: use an admission pass once (claim), or give back a claim whose buy never
-- reached the stock (restore: a 429 or 503 further down the chain must not cost the shopper
-- their turn).
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome, [5] journal, [6] stock meta.
-- ARGV[1] 'claim' or 'restore', ARGV[2] userID, ARGV[3] the pass's expiry ms, as signed in it,
-- ARGV[4] the buy's Idempotency-Key ('' for none).
-- claim returns {code, expiry ms as stored}: code 1 claimed now (or claimed before with the same
-- Idempotency-Key: the retry of a buy whose answer was lost goes on to the reservation, which
-- replays its first order), 2 used before, 3 expired, 4 not admitted (or a pass this room did
-- not give), 5 lost (queue_join.lua, KEYS[6]); restore (ARGV[3] then the expiry claim
-- returned) returns 1 restored, 0 nothing to restore (or lost: the room's restore rebuilds it).
-- A pass signed before a stop of the room (see queue_admit.lua) expires earlier than stored and
-- still claims: one admission, one claim, whichever of its passes.
-- outcome holds 'u' (used) or 'u:<key>' (used by the buy of that key), 'x' (expired).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local user = ARGV[2]
if KEYS[6] and redis.call('EXISTS', KEYS[6]) == 0 then
  if ARGV[1] == 'claim' then return {5, 0} end
  return 0
end
if ARGV[1] == 'claim' then
  local stored = redis.call('ZSCORE', KEYS[3], user)
  if not stored then
    local o = redis.call('HGET', KEYS[4], user)
    if o and ARGV[4] ~= '' and o == 'u:' .. ARGV[4] then return {1, 0} end
    if o and string.sub(o, 1, 1) == 'u' then return {2, 0} end
    if o == 'x' then return {3, 0} end
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
  local mark = 'u'
  if ARGV[4] ~= '' then mark = 'u:' .. ARGV[4] end
  redis.call('HSET', KEYS[4], user, mark)
  redis.call('HINCRBY', KEYS[2], 'used', 1)
  return {1, stored}
end
local o = redis.call('HGET', KEYS[4], user)
if o and string.sub(o, 1, 1) == 'u' then
  redis.call('HDEL', KEYS[4], user)
  redis.call('ZADD', KEYS[3], ARGV[3], user)
  redis.call('HINCRBY', KEYS[2], 'used', -1)
  return 1
end
return 0
