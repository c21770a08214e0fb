-- snapshot.lua: one consistent read of a voucher's Redis state, for the admin
-- stats, the drift report and the healer. Read only, and O(1): the counters
-- held and holds are kept in meta by reserve.lua and release.lua (and
-- written afresh by a rebuild), so no hash is walked however long the sale.
--
-- KEYS[1] meta   KEYS[2] pending
-- Returns {onSale (1|0), stock, total, held, holds, pending, out, in} where
-- held is the sum of the live holds' quantities, holds their count, pending
-- the number of holds no worker has confirmed yet, and out and in the stock
-- moved out of and into this bucket (a voucher with several shards; 0 else).

local meta = redis.call('HMGET', KEYS[1], 'stock', 'total', 'held', 'holds', 'out', 'in')
-- pending's sentinel (member 0, see reserve.lua) is not a hold.
local pending = redis.call('ZCARD', KEYS[2])
if redis.call('ZSCORE', KEYS[2], 0) then
  pending = pending - 1
end
return {redis.call('EXISTS', KEYS[1]), tonumber(meta[1]) or 0, tonumber(meta[2]) or 0,
  tonumber(meta[3]) or 0, tonumber(meta[4]) or 0, pending,
  tonumber(meta[5]) or 0, tonumber(meta[6]) or 0}
