-- queue_rate.lua: the admission rate in force of an adaptive waiting room, one per room for the
-- whole fleet. Every gateway reads it; any may change it, one change at a time: a write names
-- the version it read and is refused when another instance wrote since, so the fleet moves the
-- rate as one controller would.
-- KEYS[1] waitroom:{vID}:rate, a hash: rate, base (the room's admit_per_second the rate started
-- from), changed (ms of the rate's last change), trouble (ms the back end was last in trouble),
-- v (version).
-- ARGV[1] 'read' or 'write'. write: ARGV[2] the version read, ARGV[3] rate, ARGV[4] base,
-- ARGV[5] changed ms, ARGV[6] trouble ms, ARGV[7] expire_at ms.
-- read returns {rate, base, changed, trouble, v, now_ms} (all 0 but now for a room without a
-- rate yet: the first write starts it); write returns 1 (written, v + 1) or 0 (another instance
-- wrote since the read: nothing written, the next read sees its change).
-- The clock is Redis's, so the fleet's instances judge the time between changes alike.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'rate', 'base', 'changed', 'trouble', 'v')
local v = tonumber(f[5] or '0')
if ARGV[1] == 'read' then
  return {tonumber(f[1] or '0'), tonumber(f[2] or '0'), tonumber(f[3] or '0'), tonumber(f[4] or '0'), v, now}
end
if v ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'base', ARGV[4], 'changed', ARGV[5], 'trouble', ARGV[6], 'v', v + 1)
redis.call('PEXPIREAT', KEYS[1], ARGV[7])
return 1
