-- draw_freeze.lua: close a voucher's draw to entries for good once begin_at has come (Redis
-- TIME), so that every drawer then reads the same, final entries.
-- KEYS as draw_enter.lua: [1] entries.
-- ARGV[1] begin_ms, ARGV[2] expire_at_ms.
-- Returns {code, entries, now_ms}: code 0 before begin_at; 1 frozen (now or before); -1 the
-- entries are not open (lost from Redis, or never opened: the caller asks the record which).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[1]) then return {0, 0, now} end
if redis.call('HEXISTS', KEYS[1], '~open') == 0 then return {-1, 0, now} end
redis.call('HSET', KEYS[1], '~frozen', '1')
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return {1, tonumber(redis.call('HGET', KEYS[1], '~n') or '0'), now}
