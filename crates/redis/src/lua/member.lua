-- A member joins or leaves a channel: the presence hash, the per-user counts,
-- the node's member set, and a join/leave message for other nodes' listeners
-- -- only when the hash changed, so a repeated join or leave announces
-- nothing twice.
-- KEYS[1] presence hash, KEYS[2] users hash, KEYS[3] the node's member set
-- ARGV[1] 'join' or 'leave', ARGV[2] client id, ARGV[3] member value,
-- ARGV[4] user ('' anonymous), ARGV[5] topic, ARGV[6] message,
-- ARGV[7] member-set entry, ARGV[8] '1' = announce ('0': re-registering
-- after an outage)
local changed
if ARGV[1] == 'join' then
  redis.call('SADD', KEYS[3], ARGV[7])
  changed = redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) == 1
  if changed and ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], ARGV[4], 1) end
else
  redis.call('SREM', KEYS[3], ARGV[7])
  changed = redis.call('HDEL', KEYS[1], ARGV[2]) == 1
  if changed and ARGV[4] ~= '' and redis.call('HINCRBY', KEYS[2], ARGV[4], -1) <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[4])
  end
end
if changed and ARGV[8] == '1' then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
