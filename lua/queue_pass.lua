-- queue_pass.lua: use an admission pass once (claim), or give back a claim whose buy never
-- reached the stock (restore: a 429 or 503 further down the chain must not cost the shopper
-- their turn).
-- KEYS as queue_join.lua: [1] line, [2] room, [3] passes, [4] outcome.
-- ARGV[1] 'claim' or 'restore', ARGV[2] userID, ARGV[3] the pass's expiry ms, as signed in it.
-- claim returns 1 claimed now, 2 used before, 3 expired, 4 not admitted (or another pass);
-- restore returns 1 restored, 0 nothing to restore.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local user = ARGV[2]
if ARGV[1] == 'claim' then
  local exp = redis.call('ZSCORE', KEYS[3], user)
  if not exp then
    local o = redis.call('HGET', KEYS[4], user)
    if o == 'u' then return 2 end
    if o == 'x' then return 3 end
    return 4
  end
  if tonumber(exp) ~= tonumber(ARGV[3]) then return 4 end
  if tonumber(exp) <= now then return 3 end
  redis.call('ZREM', KEYS[3], user)
  redis.call('HSET', KEYS[4], user, 'u')
  redis.call('HINCRBY', KEYS[2], 'used', 1)
  return 1
end
if redis.call('HGET', KEYS[4], user) == 'u' then
  redis.call('HDEL', KEYS[4], user)
  redis.call('ZADD', KEYS[3], ARGV[3], user)
  redis.call('HINCRBY', KEYS[2], 'used', -1)
  return 1
end
return 0
