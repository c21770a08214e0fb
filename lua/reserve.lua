-- reserve.lua: hold stock of one seckill voucher for one shopper, atomically.
--
-- KEYS[1] seckill:{vID}:meta    hash: stock, total, begin_ms, end_ms, limit, price,
--                               held, holds (counters of the live holds), expire_ms
-- KEYS[2] seckill:{vID}:ledger  hash, everything of the sale's orders, requests and buyers:
--                                 <orderID>         "userID:qty:reservedAtMs:requestKey" | "x" (released)
--                                 r<userID>:<key>   orderID, the request key's first order
--                                 u<userID>         "qty orderID orderID ...": the quantity the user
--                                                   holds or bought, then their live order ids
--                                 s<orderID>        "1": a keyed hold whose fate is not decided yet
--                                                   (its gateway has not promised it, see below)
--                                 _                 keeps the hash, and its expiry, when all else is gone
-- KEYS[3] seckill:{vID}:pending zset: orderID scored by reservedAtMs, not yet persisted;
--                               member 0 scored +inf keeps the zset, and its expiry, when empty
-- ARGV[1] userID, ARGV[2] orderID, ARGV[3] quantity, ARGV[4] requestKey ("" = none)
--
-- Returns {code, orderID, stockLeft}:
--   0 held (or a client retry of this very call: same order, same user, same quantity, same key)
--   1 replay: the request key or order id is known; orderID is the first order, nothing new held
--   2 not on sale (no meta)   3 not started   4 ended   5 sold out   6 per-user limit exceeded
--   7 the order id is taken by a different reservation (order ids are not unique: a fleet bug)
--   8 undecided: the request key is known, but its order's fate is not decided yet; orderID is
--     that order, nothing new held, and the caller must not answer with it (see below)
--
-- Every key comes from KEYS and carries the voucher's hash tag, so the script
-- runs on one Redis Cluster slot. The window is checked with the server's TIME,
-- never a caller's clock. Nothing is written before every check has passed, so
-- an error part-way leaves no trace. The script is idempotent on the request
-- key and on the order id because go-redis may send a write script twice.
--
-- A hold costs seven commands: this call, one read of the ledger (the order
-- id, the request key and the user's count in one HMGET), one of meta, TIME,
-- and one write each of the ledger, meta and pending. The keys expire at the
-- sale's end plus the grace period, set once when the sale is warmed or
-- rebuilt (the sentinels keep the ledger and pending from vanishing, and so
-- from losing their expiry, when a release or a worker empties them): no buy
-- sets an expiry.
--
-- A 202 stands (seckill/RULES.md): a replay may promise only an order whose
-- fate is decided. A keyed hold is written undecided, with its s<orderID>
-- field, in the same HSET as the hold itself, so there is no moment at which
-- another gateway could see the hold without it. The gateway that made the
-- hold decides it: it deletes the field once its message is written
-- (Store.Promise), or gives the hold back (release.lua deletes the field with
-- the hold). A worker that persisted the order decides it too: the order left
-- pending. A replay of an order that still has the field and is still pending
-- answers 8, never 1: the caller waits and asks again, and finds the order
-- promised (1), or, after a give-back, the key forgotten (a new hold).

local user, oid, key = ARGV[1], ARGV[2], ARGV[4]
local qty = tonumber(ARGV[3])
if not qty or qty < 1 or qty ~= math.floor(qty) or not tonumber(user) or not tonumber(oid) then
  return redis.error_reply('ERR reserve.lua: bad arguments')
end

local userField = 'u' .. user
local reqField = 'r' .. user .. ':' .. key
local got
if key ~= '' then
  got = redis.call('HMGET', KEYS[2], oid, userField, reqField)
else
  got = redis.call('HMGET', KEYS[2], oid, userField)
end
local entry, mine, first = got[1], got[2], got[3]

local function left()
  return tonumber(redis.call('HGET', KEYS[1], 'stock')) or 0
end

-- The answer for an attempt Redis already knows about. A retry of this very
-- call (same order, still held, same reservation) gets its first answer, 0, so
-- the caller goes on to queue it; anything else is a replay of the first order.
local function known(first)
  if first ~= oid or not entry or entry == 'x' then
    return {1, first, left()}
  end
  local u, q, _, k = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
  if u ~= user or tonumber(q) ~= qty or k ~= key then
    return {7, first, left()}
  end
  return {0, first, left()}
end

-- A known request key answers first. An unkeyed call answers from its order
-- id before any check, so that a retry of it answers like the first call even
-- once the stock or the limit is used up. A keyed call's retry is found by
-- its key; its order id, read above, is judged only once every check has
-- passed, where the hold would be written, so an id taken by another
-- reservation still writes nothing.
if first then
  if first ~= oid and redis.call('HEXISTS', KEYS[2], 's' .. first) == 1
      and redis.call('ZSCORE', KEYS[3], first) then
    return {8, first, left()}
  end
  return known(first)
end
if key == '' and entry then
  return known(oid)
end

local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin_ms', 'end_ms', 'limit', 'held', 'holds')
local stock, beginMs, endMs, limit = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3]), tonumber(meta[4])
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
local bought, ids = 0, ''
if mine then
  local q, rest = string.match(mine, '^(%d+)(.*)$')
  bought, ids = tonumber(q) or 0, rest or ''
end
if bought + qty > limit then
  return {6, 0, stock}
end
if entry then
  return known(oid)
end

local hold = user .. ':' .. qty .. ':' .. now .. ':' .. key
mine = (bought + qty) .. ids .. ' ' .. oid
if key ~= '' then
  redis.call('HSET', KEYS[2], oid, hold, userField, mine, reqField, oid, 's' .. oid, 1)
else
  redis.call('HSET', KEYS[2], oid, hold, userField, mine)
end
stock = stock - qty
redis.call('HSET', KEYS[1], 'stock', stock, 'held', (tonumber(meta[5]) or 0) + qty, 'holds', (tonumber(meta[6]) or 0) + 1)
redis.call('ZADD', KEYS[3], now, oid)
return {0, oid, stock}
