-- reserve_batch.lua: reserve.lua for many buys of one bucket in one call,
-- with the shoppers' rate limit.
--
-- KEYS as reserve.lua's: KEYS[1] meta, KEYS[2] ledger, KEYS[3] pending.
-- ARGV[1] n, the number of buys; ARGV[2] the rate limit's emission interval
-- in microseconds (0: no limit); ARGV[3] its burst; then 4 values per buy,
-- in the order they are decided: userID, orderID, quantity, requestKey
-- ("" = none).
--
-- Returns 3·n values, {code, orderID, stockLeft} per buy in ARGV's order,
-- each exactly what reserve.lua would answer had the buys been sent one after
-- the other in that order: same codes, same writes. reserve.lua's header is
-- the contract of one buy (the ledger's fields, the codes, the undecided mark,
-- why the script is idempotent); this one only decides many of them, and
-- adds one code:
--   9 rate limited: the shopper's attempts at this bucket came faster than
--     the limit; orderID is then the wait in milliseconds until an attempt
--     would pass (Retry-After), nothing is held
--
-- The limit is GCRA per shopper and bucket, as redis_rate computes it (rate
-- 1/interval, burst attempts at once), its theoretical arrival time kept in
-- the ledger's field g<userID> in microseconds of Redis's clock, so it lives
-- in the bucket's slot and expires with the sale. Every attempt the sale
-- judges is charged, before it is judged (so a sold-out or not-started
-- answer costs the budget too, as a limit in front of the sale would), but
-- for one of a bucket without meta (2), whose ledger may be gone: a charge
-- would recreate it without its expiry. An
-- attempt Redis already knows is answered free, as reserve.lua answers it:
-- a retry of this very call (it paid once), and a replay of a known request
-- key, which holds nothing and which the gateway asks again on its own
-- while the key's order is undecided.
--
-- What the batch saves is Redis's work per buy: the ledger fields of every buy
-- are read in one HMGET, meta once, TIME once (only when some buy gets that
-- far), and the writes go out at the end in one HSET of the ledger, one of
-- meta and one ZADD of pending, whatever n is. Every buy reads the ledger
-- through `fields`, which the earlier buys' writes update, so a later buy of
-- the same user, request key or order id sees them as it would in Redis.
-- Every argument is checked before anything is read, and nothing is written
-- before every buy is decided, so an error leaves no trace.

local n, interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or n ~= math.floor(n) or #ARGV ~= 3 + 4 * n
    or not interval or interval < 0 or not burst or burst < 1 then
  return redis.error_reply('ERR reserve_batch.lua: bad arguments')
end
for i = 0, n - 1 do
  local user, oid, qty = ARGV[4 + 4 * i], ARGV[5 + 4 * i], tonumber(ARGV[6 + 4 * i])
  if not qty or qty < 1 or qty ~= math.floor(qty) or not tonumber(user) or not tonumber(oid) then
    return redis.error_reply('ERR reserve_batch.lua: bad arguments')
  end
end

-- fields: the ledger as this batch sees it (false = absent); dirty: the
-- fields written, in order, for the one HSET at the end.
local fields, dirty = {}, {}
local wanted, seen = {}, {}
local function want(f)
  if not seen[f] then
    seen[f] = true
    wanted[#wanted + 1] = f
  end
end
for i = 0, n - 1 do
  local user, key = ARGV[4 + 4 * i], ARGV[7 + 4 * i]
  want(ARGV[5 + 4 * i])
  want('u' .. user)
  if interval > 0 then
    want('g' .. user)
  end
  if key ~= '' then
    want('r' .. user .. ':' .. key)
  end
end
local got = redis.call('HMGET', KEYS[2], unpack(wanted))
for i, f in ipairs(wanted) do
  fields[f] = got[i] or false
end
local function get(f)
  local v = fields[f]
  if v == nil then
    v = redis.call('HGET', KEYS[2], f) or false
    fields[f] = v
  end
  return v or nil
end
local function set(f, v)
  fields[f] = v
  dirty[#dirty + 1] = f
end

local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin_ms', 'end_ms', 'limit', 'held', 'holds')
local stock, beginMs, endMs, limit = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3]), tonumber(meta[4])
local onSale = stock and beginMs and endMs and limit
local held, holds = tonumber(meta[5]) or 0, tonumber(meta[6]) or 0
local sold = false -- whether any buy held stock (meta is written then)

-- added: the order ids this batch holds, in order, for the one ZADD;
-- pending: the same as a set.
local added, pending = {}, {}
local function isPending(oid)
  return pending[oid] or redis.call('ZSCORE', KEYS[3], oid)
end

-- now is Redis's clock in milliseconds, nowUs in microseconds.
local now, nowUs
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

-- limited charges one attempt of user to their GCRA budget, or answers how
-- many milliseconds they must wait (redis_rate's arithmetic in whole
-- microseconds, which a double holds exactly).
local function limited(user)
  clock()
  local f = 'g' .. user
  local tat = math.max(tonumber(get(f)) or nowUs, nowUs)
  local newTat = tat + interval
  local wait = newTat - burst * interval - nowUs
  if wait > 0 then
    return math.ceil(wait / 1000)
  end
  set(f, string.format('%d', newTat))
  return nil
end

-- known is reserve.lua's answer for an attempt Redis already knows about:
-- first is the order it is known by, entry the ledger's entry of its own
-- order id.
local function known(first, entry, user, oid, qty, key, left)
  if first ~= oid or not entry or entry == 'x' then
    return 1, first, left
  end
  local u, q, _, k = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
  if u ~= user or tonumber(q) ~= qty or k ~= key then
    return 7, first, left
  end
  return 0, first, left
end

-- one decides one buy as reserve.lua does, on the batch's view.
local function one(user, oid, qty, key)
  local userField = 'u' .. user
  local reqField = 'r' .. user .. ':' .. key
  local entry, mine = get(oid), get(userField)
  local first
  if key ~= '' then
    first = get(reqField)
  end
  local left = stock or 0

  if first then
    if first ~= oid and get('s' .. first) and isPending(first) then
      return 8, first, left
    end
    return known(first, entry, user, oid, qty, key, left)
  end
  if key == '' and entry then
    return known(oid, entry, user, oid, qty, key, left)
  end
  if not onSale then
    return 2, 0, left
  end
  if interval > 0 then
    local wait = limited(user)
    if wait then
      return 9, wait, left
    end
  end
  local t = clock()
  if t < beginMs then
    return 3, 0, stock
  end
  if t >= endMs then
    return 4, 0, stock
  end
  if stock < qty then
    return 5, 0, stock
  end
  local bought, ids = 0, ''
  if mine then
    local q, rest = string.match(mine, '^(%d+)(.*)$')
    bought, ids = tonumber(q) or 0, rest or ''
  end
  if bought + qty > limit then
    return 6, 0, stock
  end
  if entry then
    return known(oid, entry, user, oid, qty, key, left)
  end

  set(oid, user .. ':' .. qty .. ':' .. t .. ':' .. key)
  set(userField, (bought + qty) .. ids .. ' ' .. oid)
  if key ~= '' then
    set(reqField, oid)
    set('s' .. oid, '1')
  end
  stock, held, holds, sold = stock - qty, held + qty, holds + 1, true
  pending[oid] = true
  added[#added + 1] = oid
  return 0, oid, stock
end

local out = {}
for i = 0, n - 1 do
  local code, oid, left = one(ARGV[4 + 4 * i], ARGV[5 + 4 * i], tonumber(ARGV[6 + 4 * i]), ARGV[7 + 4 * i])
  out[#out + 1], out[#out + 2], out[#out + 3] = code, oid, left
end

if #dirty > 0 then
  local hset = {}
  for _, f in ipairs(dirty) do
    hset[#hset + 1] = f
    hset[#hset + 1] = fields[f]
  end
  redis.call('HSET', KEYS[2], unpack(hset))
end
if sold then
  redis.call('HSET', KEYS[1], 'stock', stock, 'held', held, 'holds', holds)
  local z = {}
  for _, oid in ipairs(added) do
    z[#z + 1] = now
    z[#z + 1] = oid
  end
  redis.call('ZADD', KEYS[3], unpack(z))
end
return out
