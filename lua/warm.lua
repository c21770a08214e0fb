-- warm.lua: put a seckill voucher on sale by writing its meta hash, once.
--
-- KEYS[1] seckill:{vID}:meta   KEYS[2] seckill:{vID}:ledger   KEYS[3] seckill:{vID}:pending
-- ARGV stock, total, begin_ms, end_ms, limit, price, expire_ms (when the sale's
-- state expires: its end plus the grace period), and for a bucket of a voucher with several
-- shards the epoch (see transfer_in.lua): meta then also counts moves out and
-- in and releases (out, in, rels).
-- Returns 1 written, 0 already on sale with the same total, window, limit and
-- price (a retried warm: the live stock is kept), -1 on sale with other values
-- (refused: overwriting the stock of a voucher that is selling would oversell).

if redis.call('EXISTS', KEYS[1]) == 1 then
  local cur = redis.call('HMGET', KEYS[1], 'total', 'begin_ms', 'end_ms', 'limit', 'price')
  for i = 1, 5 do
    if cur[i] ~= ARGV[i + 1] then
      return -1
    end
  end
  return 0
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'total', ARGV[2], 'begin_ms', ARGV[3],
  'end_ms', ARGV[4], 'limit', ARGV[5], 'price', ARGV[6], 'held', 0, 'holds', 0, 'expire_ms', ARGV[7])
if ARGV[8] then
  redis.call('HSET', KEYS[1], 'out', 0, 'in', 0, 'rels', 0, 'epoch', ARGV[8])
end
-- The ledger and pending get their sentinels (see reserve.lua), so both
-- exist from now on, and every key reserve.lua writes expires with meta:
-- no buy sets an expiry.
redis.call('HSET', KEYS[2], '_', 1)
redis.call('ZADD', KEYS[3], '+inf', 0)
for i = 1, 3 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[7])
end
return 1
