-- A member leaves a channel (no-op if it is not there).
-- KEYS as join.lua; ARGV[1] client id, ARGV[2] user, ARGV[3] topic,
-- ARGV[4] leave message, ARGV[5] member-set entry
redis.call('SREM', KEYS[3], ARGV[5])
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  if ARGV[2] ~= '' and redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[2])
  end
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
