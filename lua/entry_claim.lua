-- entry_claim.lua: one place per person in a voucher's line or draw (seckill/eligibility).
-- KEYS[1] persons  hash  sha256(person key) -> the user id that holds the person's place
-- ARGV[1] the person key's hash, ARGV[2] the user id, ARGV[3] expire_at_ms (when the key goes)
-- Returns '' when the person's place is the user's (claimed now, or before by the same user),
-- else the user id that holds it: a second account of the same person is refused.
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and held ~= ARGV[2] then return held end
if not held then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return ''
