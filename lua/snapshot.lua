-- snapshot.lua: one consistent read of a voucher's Redis state, for the drift
-- report. Read only. It walks the orders hash inside Redis (one pass, no data
-- shipped to the client), so it costs O(orders): for operators, not the buy path.
--
-- KEYS[1] meta   KEYS[2] buyers   KEYS[3] orders   KEYS[4] pending
-- Returns {onSale (1|0), stock, total, held, holds, pending, buyersSum} where held is
-- the sum of the live holds' quantities, holds their count, pending the zset size and
-- buyersSum the sum of the per-user counts (equal to held unless something drifted).

local meta = redis.call('HMGET', KEYS[1], 'stock', 'total')
local onSale = redis.call('EXISTS', KEYS[1])
local held, holds = 0, 0
local orders = redis.call('HVALS', KEYS[3])
for i = 1, #orders do
  local q = string.match(orders[i], '^[^:]*:([^:]*):')
  if q then
    held = held + tonumber(q)
    holds = holds + 1
  end
end
local buyersSum = 0
local buyers = redis.call('HVALS', KEYS[2])
for i = 1, #buyers do
  buyersSum = buyersSum + (tonumber(buyers[i]) or 0)
end
return {onSale, tonumber(meta[1]) or 0, tonumber(meta[2]) or 0, held, holds,
  redis.call('ZCARD', KEYS[4]), buyersSum}
