-- release.lua: give one reservation's stock back, at most once per order.
--
-- KEYS[1] seckill:{vID}:meta   KEYS[2] seckill:{vID}:ledger   KEYS[3] seckill:{vID}:pending
-- (their fields as reserve.lua says)
-- KEYS[4] seckill:{vID}:released  zset: "orderID:requestField" by release time (ms)
-- ARGV[1] orderID, ARGV[2] mode: any | unsent | ifpending | refused, ARGV[3] the order's userID
-- (checked against the ledger: a mismatch is an error, never a release of someone
-- else's hold), ARGV[4] the idempotency window in ms (0: keep tombstones and request
-- keys for the sale's life), ARGV[5] "1" for a bucket of a voucher with several
-- shards: meta's rels counts the releases, so a buyer deciding "sold out" over all
-- buckets sees one it raced with.
--
-- Returns 1 released, 0 nothing to release (unknown order, or already released),
-- 2 not released because a worker already confirmed it (mode ifpending only).
--
-- Mode refused ends a hold PostgreSQL refused for want of stock without giving
-- its unit back: the record had no unit for it, so Redis held one too many (it
-- lost writes it had acknowledged, as a promoted replica does). Put back on
-- sale, that unit would be sold and refused again, one shopper after another.
-- The unit leaves the total instead, which keeps left + held == total; the
-- totals of Redis and PostgreSQL then differ, which is drift the healer
-- repairs from PostgreSQL.
--
-- The order's entry becomes the tombstone "x": a second release finds nothing,
-- and a late retry of the same reserve can never hold again. Its id leaves the
-- user's field of the ledger, and its quantity the user's count (the field goes
-- once nothing is left). Mode unsent also forgets the request key (the attempt
-- never reached the queue, so a retry of the same key is a new attempt); the
-- other modes keep it, so a replay answers with the same, now final, order.
-- A keyed hold's undecided field (reserve.lua's s<orderID>) goes with it in
-- every mode: a released order's fate is decided, and a replay waiting on it
-- finds either the final order or, after unsent, no order for its key.
--
-- Bounded state: each release is recorded in KEYS[4]; tombstones and request
-- keys of releases older than the window are forgotten, up to 16 per call
-- (more than the one this call adds, so the zset shrinks back after a
-- burst). A forgotten tombstone is answered like an unknown order (nothing
-- to release); a forgotten request key makes a later attempt with it a new
-- attempt: that is the window of the replay guarantee for released orders.

local oid, mode, user = ARGV[1], ARGV[2], ARGV[3]
if mode ~= 'any' and mode ~= 'unsent' and mode ~= 'ifpending' and mode ~= 'refused' then
  return redis.error_reply('ERR release.lua: bad mode')
end

local entry = redis.call('HGET', KEYS[2], oid)
if not entry or entry == 'x' then
  return 0
end
local u, q, _, k = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
local qty = tonumber(q)
if not qty then
  return redis.error_reply('ERR release.lua: corrupt orders entry')
end
if u ~= user then
  return redis.error_reply('ERR release.lua: order belongs to another user')
end
if mode == 'ifpending' and not redis.call('ZSCORE', KEYS[3], oid) then
  return 2
end

-- A voucher taken off sale has no meta; do not resurrect a half meta hash
-- (the rebuild that puts it back writes the counters afresh).
local onSale = redis.call('EXISTS', KEYS[1]) == 1
if onSale then
  if mode == 'refused' then
    redis.call('HINCRBY', KEYS[1], 'total', -qty)
  else
    redis.call('HINCRBY', KEYS[1], 'stock', qty)
  end
  redis.call('HINCRBY', KEYS[1], 'held', -qty)
  redis.call('HINCRBY', KEYS[1], 'holds', -1)
  if ARGV[5] == '1' and mode ~= 'refused' then
    redis.call('HINCRBY', KEYS[1], 'rels', 1)
  end
end
local userField = 'u' .. u
local bought, ids = string.match(redis.call('HGET', KEYS[2], userField) or '', '^(%d+)(.*)$')
bought = (tonumber(bought) or 0) - qty
local mine = {bought}
for id in string.gmatch(ids or '', '%d+') do
  if id ~= oid then
    mine[#mine + 1] = id
  end
end
if bought > 0 then
  redis.call('HSET', KEYS[2], oid, 'x', userField, table.concat(mine, ' '))
else
  redis.call('HSET', KEYS[2], oid, 'x')
  redis.call('HDEL', KEYS[2], userField)
end
redis.call('ZREM', KEYS[3], oid)
local field = ''
if k ~= '' then
  redis.call('HDEL', KEYS[2], 's' .. oid)
  field = 'r' .. u .. ':' .. k
  if mode == 'unsent' and redis.call('HGET', KEYS[2], field) == oid then
    redis.call('HDEL', KEYS[2], field)
    field = ''
  end
end

local window = tonumber(ARGV[4]) or 0
if window > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[4], now, oid .. ':' .. field)
  local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - window, 'LIMIT', 0, 16)
  for i = 1, #old do
    local o, f = string.match(old[i], '^([^:]*):(.*)$')
    if redis.call('HGET', KEYS[2], o) == 'x' then
      redis.call('HDEL', KEYS[2], o)
    end
    if f ~= '' and redis.call('HGET', KEYS[2], f) == o then
      redis.call('HDEL', KEYS[2], f)
    end
    redis.call('ZREM', KEYS[4], old[i])
  end
  local expireMs = onSale and tonumber(redis.call('HGET', KEYS[1], 'expire_ms'))
  if expireMs then
    redis.call('PEXPIREAT', KEYS[4], expireMs)
  end
end
return 1
