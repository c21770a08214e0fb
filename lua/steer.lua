-- steer.lua: an operator's change of one bucket of a running sale (PATCH
-- /api/v1/admin/vouchers/{id}): stock added, the end moved later. Once per
-- change id: go-redis may send a write script twice.
--
-- KEYS[1] seckill:{vID}:meta (of the bucket)
-- ARGV[1] the change id, ARGV[2] stock to add to both stock and total (negative
-- takes back an addition whose record did not commit: never more than is left),
-- ARGV[3] the new end_ms and ARGV[4] the new expire_ms ('' keep them),
-- ARGV[5] '1' for a bucket of a voucher with several shards: rels counts the
-- addition like a release, so a buyer deciding "sold out" over every bucket sees
-- that stock came (see release.lua).
-- Returns the bucket's stock after the change; -1 not on sale (no meta: lost,
-- or taken off sale for a repair), -2 not that much left to take back.
--
-- stock + held (+ out - in) = total holds before and after: both move by the
-- same amount in one step.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local stock = tonumber(redis.call('HGET', KEYS[1], 'stock')) or 0
if redis.call('HGET', KEYS[1], 'steer') == ARGV[1] then
  return stock
end
local add = tonumber(ARGV[2])
if stock + add < 0 then
  return -2
end
if add ~= 0 then
  stock = redis.call('HINCRBY', KEYS[1], 'stock', add)
  redis.call('HINCRBY', KEYS[1], 'total', add)
  if ARGV[5] == '1' then
    redis.call('HINCRBY', KEYS[1], 'rels', 1)
  end
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'end_ms', ARGV[3], 'expire_ms', ARGV[4])
  redis.call('PEXPIREAT', KEYS[1], ARGV[4])
end
redis.call('HSET', KEYS[1], 'steer', ARGV[1])
return stock
