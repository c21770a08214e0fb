-- reserve.lua: hold stock of one seckill voucher for one shopper, atomically.
--
-- KEYS[1] seckill:{vID}:meta          hash: stock, total, begin_ms, end_ms, limit, price,
--                                     held, holds (counters of the live holds), expire_ms
-- KEYS[2] seckill:{vID}:buyers        hash: userID -> quantity held or bought
-- KEYS[3] seckill:{vID}:reqs          hash: "userID:requestKey" -> orderID
-- KEYS[4] seckill:{vID}:orders        hash: orderID -> "userID:qty:reservedAtMs:requestKey" | "x"
-- KEYS[5] seckill:{vID}:pending       zset: orderID scored by reservedAtMs, not yet persisted
-- KEYS[6] seckill:{vID}:user:<userID> set: the user's live order ids
-- ARGV[1] userID, ARGV[2] orderID, ARGV[3] quantity, ARGV[4] requestKey ("" = none)
--
-- Returns {code, orderID, stockLeft}:
--   0 held (or a client retry of this very call: same order, same user, same quantity, same key)
--   1 replay: the request key or order id is known; orderID is the first order, nothing new held
--   2 not on sale (no meta)   3 not started   4 ended   5 sold out   6 per-user limit exceeded
--   7 the order id is taken by a different reservation (order ids are not unique: a fleet bug)
--
-- Every key comes from KEYS and carries the voucher's hash tag, so the script
-- runs on one Redis Cluster slot. The window is checked with the server's TIME,
-- never a caller's clock. Nothing is written before every check has passed, so
-- an error part-way leaves no trace. The script is idempotent on the request
-- key and on the order id because go-redis may send a write script twice.
--
-- Every key it writes expires at meta's expire_ms (the sale's end plus the
-- grace period), so a sale's state does not outlive it. The expiry is set
-- when a key appears, not on every call: one EXISTS tells whether the
-- voucher's shared keys are all there already (they are, but for the first
-- buys and a pending zset the workers emptied), and only the user's own set,
-- new for a user's first hold, gets its expiry each time. The counters held
-- and holds let readers see the holds without walking the orders hash; the
-- three counters of meta are written in one HSET from the values read.

local user, oid, key = ARGV[1], ARGV[2], ARGV[4]
local qty = tonumber(ARGV[3])
if not qty or qty < 1 or qty ~= math.floor(qty) or not tonumber(user) or not tonumber(oid) then
  return redis.error_reply('ERR reserve.lua: bad arguments')
end

local function left()
  return tonumber(redis.call('HGET', KEYS[1], 'stock')) or 0
end

-- The answer for an attempt Redis already knows about. A retry of this very
-- call (same order, still held, same reservation) gets its first answer, 0, so
-- the caller goes on to queue it; anything else is a replay of the first order.
local function known(first)
  local entry = redis.call('HGET', KEYS[4], first)
  if first ~= oid or not entry or entry == 'x' then
    return {1, first, left()}
  end
  local u, q, _, k = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
  if u ~= user or tonumber(q) ~= qty or k ~= key then
    return {7, first, left()}
  end
  return {0, first, left()}
end

-- A known request key answers first. An unkeyed call looks its order id up
-- before any check, so that a retry of it answers like the first call even
-- once the stock or the limit is used up. A keyed call's retry is found by
-- its key; its order id is checked by the HSETNX that records the hold, the
-- first write, so an id taken by another reservation still writes nothing.
local reqField = user .. ':' .. key
if key ~= '' then
  local first = redis.call('HGET', KEYS[3], reqField)
  if first then
    return known(first)
  end
elseif redis.call('HEXISTS', KEYS[4], oid) == 1 then
  return known(oid)
end

local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin_ms', 'end_ms', 'limit', 'expire_ms', 'held', 'holds')
local stock, beginMs, endMs, limit = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3]), tonumber(meta[4])
local expireMs = tonumber(meta[5])
if not (stock and beginMs and endMs and limit) then
  return {2, 0, stock or 0}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < beginMs then
  return {3, 0, stock}
end
if now >= endMs then
  return {4, 0, stock}
end
if stock < qty then
  return {5, 0, stock}
end
local bought = tonumber(redis.call('HGET', KEYS[2], user)) or 0
if bought + qty > limit then
  return {6, 0, stock}
end

-- Whether the shared keys this call writes are all there already (and so
-- expire at expireMs): buyers, orders, pending, and reqs for a keyed call.
local allThere = true
if expireMs then
  if key ~= '' then
    allThere = redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4], KEYS[5]) == 4
  else
    allThere = redis.call('EXISTS', KEYS[2], KEYS[4], KEYS[5]) == 3
  end
end

local entry = user .. ':' .. qty .. ':' .. now .. ':' .. key
if key ~= '' then
  if redis.call('HSETNX', KEYS[4], oid, entry) == 0 then
    return known(oid)
  end
  redis.call('HSET', KEYS[3], reqField, oid)
else
  redis.call('HSET', KEYS[4], oid, entry)
end
stock = stock - qty
redis.call('HSET', KEYS[1], 'stock', stock, 'held', (tonumber(meta[6]) or 0) + qty, 'holds', (tonumber(meta[7]) or 0) + 1)
redis.call('HINCRBY', KEYS[2], user, qty)
redis.call('ZADD', KEYS[5], now, oid)
redis.call('SADD', KEYS[6], oid)
if expireMs then
  if not allThere then
    for i = 2, 5 do
      if i ~= 3 or key ~= '' then
        redis.call('PEXPIREAT', KEYS[i], expireMs)
      end
    end
  end
  redis.call('PEXPIREAT', KEYS[6], expireMs)
end
return {0, oid, stock}
