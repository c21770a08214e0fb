-- lease_renew.lua: extend a lease only while we still own it (compare-and-pexpire).
-- KEYS[1] the lease key; ARGV[1] owner token, ARGV[2] ttl in ms. Returns 1 renewed, 0 not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
