-- A member joins a channel: presence hash, user count, the node's index, and
-- a join message for other nodes' listeners -- only if it was not there yet,
-- so re-registering members after an outage announces nothing twice.
-- KEYS[1] presence hash, KEYS[2] users hash, KEYS[3] the node's member set
-- ARGV[1] client id, ARGV[2] member value, ARGV[3] user ('' anonymous),
-- ARGV[4] topic, ARGV[5] join message, ARGV[6] member-set entry,
-- ARGV[7] '1' = announce ('0': re-registering after an outage)
redis.call('SADD', KEYS[3], ARGV[6])
if redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  if ARGV[3] ~= '' then redis.call('HINCRBY', KEYS[2], ARGV[3], 1) end
  if ARGV[7] == '1' then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
end
return 1
