-- draw_freeze.lua: close a voucher's draw to entries for good once begin_at has come (Redis
-- TIME), and answer its seed, so that every drawer then reads the same, final entries.
-- KEYS as draw_enter.lua: [1] meta, [2] entries.
-- ARGV[1] begin_ms, ARGV[2] a fresh random seed (hex; used only if none is set: nobody entered
-- and nobody opened the draw), ARGV[3] expire_at_ms.
-- Returns {frozen, seed, now_ms}: frozen 0 (and seed '') before begin_at.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[1]) then return {0, '', now} end
redis.call('HSETNX', KEYS[1], 'seed', ARGV[2])
redis.call('HSET', KEYS[1], 'frozen', '1')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return {1, redis.call('HGET', KEYS[1], 'seed'), now}
