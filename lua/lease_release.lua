-- lease_release.lua: delete a lease only if we still own it (compare-and-delete),
-- so a lease that expired and was taken by another instance is left alone.
-- KEYS[1] the lease key; ARGV[1] owner token. Returns 1 deleted, 0 not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
