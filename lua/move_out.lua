-- move_out.lua: step 1 of moving stock between two buckets of one voucher
-- (a voucher with several shards): take it off the donor bucket.
--
-- KEYS[1] seckill:{vID.d}:meta    the donor bucket's meta (stock, out, epoch, expire_ms)
-- KEYS[2] seckill:{vID.d}:moves   hash: moveID -> "toBucket:quantity:epoch"
-- ARGV[1] moveID (unique), ARGV[2] the quantity wanted, ARGV[3] the receiving bucket
--
-- Returns {moved, epoch}: moved is at most the wanted quantity and at most the
-- bucket's stock (0 when it has none or is not on sale). The stock leaves
-- 'stock' and is counted in 'out', and the move is recorded in KEYS[2], in one
-- step: a process that dies before move_in.lua leaves the record, and the next
-- buyer or the reconciler credits it. Per bucket, stock + held + out - in
-- stays the bucket's total.

local want = tonumber(ARGV[2])
if not want or want < 1 or not tonumber(ARGV[3]) then
  return redis.error_reply('ERR move_out.lua: bad arguments')
end
local meta = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'expire_ms')
local stock, epoch = tonumber(meta[1]), meta[2]
if not stock or not epoch then
  return {0, ''}
end
local n = math.min(stock, want)
if n < 1 then
  return {0, epoch}
end
redis.call('HINCRBY', KEYS[1], 'stock', -n)
redis.call('HINCRBY', KEYS[1], 'out', n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ':' .. n .. ':' .. epoch)
if tonumber(meta[3]) then
  redis.call('PEXPIREAT', KEYS[2], meta[3])
end
return {n, epoch}
