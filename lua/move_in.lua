-- move_in.lua: step 2 of moving stock between two buckets of one voucher:
-- credit the receiving bucket, at most once per move.
--
-- KEYS[1] seckill:{vID.h}:meta      the receiving bucket's meta
-- KEYS[2] seckill:{vID.h}:credited  set: the move ids credited here
-- ARGV[1] moveID, ARGV[2] quantity, ARGV[3] the epoch move_out.lua answered
--
-- Returns 1 credited, 0 credited before (a second try, or the reconciler was
-- first), -1 the bucket is not on sale (keep the record: a rebuild replaces
-- the voucher's state anyway), -2 the bucket was rebuilt since the move began
-- (its epoch differs: the move belongs to state that no longer exists, so
-- crediting it would create stock).

local n = tonumber(ARGV[2])
if not n or n < 1 then
  return redis.error_reply('ERR move_in.lua: bad arguments')
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 0
end
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'expire_ms')
if not meta[1] then
  return -1
end
if meta[1] ~= ARGV[3] then
  return -2
end
redis.call('HINCRBY', KEYS[1], 'stock', n)
redis.call('HINCRBY', KEYS[1], 'in', n)
redis.call('SADD', KEYS[2], ARGV[1])
if tonumber(meta[2]) then
  redis.call('PEXPIREAT', KEYS[2], meta[2])
end
return 1
