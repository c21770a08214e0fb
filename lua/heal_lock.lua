-- heal_lock.lua: take a voucher's heal lease and the fencing number that goes with it.
-- KEYS[1] the lease key, KEYS[2] the voucher's last fencing number (both in bucket 0's slot);
-- ARGV[1] a random owner part, ARGV[2] the lease's ttl in ms, ARGV[3] how long the last number is kept, in ms.
-- Returns the token "<fence>:<owner>", or false when another healer holds the lease.
--
-- The number is max(last + 1, this server's TIME in microseconds): strictly greater than any
-- number given before while the last one is kept, and, once it is lost (data loss, a cluster
-- node restarted empty), still greater than the numbers the buckets recorded, because the next
-- lease is only given after the previous one ended (a lease ttl later, far more than the clock
-- skew of the servers that may serve this slot).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local t = redis.call('TIME')
local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if f <= last then
  f = last + 1
end
local fs = string.format('%d', f)
redis.call('SET', KEYS[2], fs, 'PX', ARGV[3])
local tok = fs .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], tok, 'PX', ARGV[2])
return tok
