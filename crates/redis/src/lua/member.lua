-- A member joins or leaves a channel: the presence hash, the per-user counts,
-- the node's member set, the namespace's set of occupied channels, and a
-- join/leave message for other nodes' listeners -- only when the hash
-- changed, so a repeated join or leave announces nothing twice. The message
-- is upper-cased ('J:'/'L:') when it is the user's first connection in the
-- cluster or their last.
-- KEYS[1] presence hash, KEYS[2] users hash, KEYS[3] the node's member set,
-- KEYS[4] the namespace's occupied channels (set), KEYS[5] the channel's
-- pending vacate (a string while a vacated report waits out its delay)
-- ARGV[1] 'join' or 'leave', ARGV[2] client id, ARGV[3] member value,
-- ARGV[4] user ('' anonymous), ARGV[5] topic, ARGV[6] message,
-- ARGV[7] member-set entry, ARGV[8] '1' = announce ('0': re-registering
-- after an outage), ARGV[9] channel, ARGV[10] vacated delay in ms ('0':
-- none), ARGV[11] 's' to SPUBLISH (Redis Cluster, decision 0021)
-- Returns the cluster-wide transitions when announcing (else 0): 1 channel
-- occupied, 2 channel vacated, 4 user added, 8 user removed, 16 occupied
-- again while its vacate was pending (which cancels both reports) (summed).
-- With a delay, a vacated channel gets KEYS[5] (for twice the delay and
-- 10 s more, so it outlives the reporter's timer); the reporter deletes it
-- when the delay is over and reports the vacate only if it was still there.
local changed
local flags = 0
if ARGV[1] == 'join' then
  redis.call('SADD', KEYS[3], ARGV[7])
  changed = redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) == 1
  if changed then
    if redis.call('HLEN', KEYS[1]) == 1 then
      redis.call('SADD', KEYS[4], ARGV[9])
      if redis.call('DEL', KEYS[5]) == 1 then
        flags = flags + 16
      else
        flags = flags + 1
      end
    end
    if ARGV[4] ~= '' and redis.call('HINCRBY', KEYS[2], ARGV[4], 1) == 1 then
      flags = flags + 4
    end
  end
else
  redis.call('SREM', KEYS[3], ARGV[7])
  changed = redis.call('HDEL', KEYS[1], ARGV[2]) == 1
  if changed then
    if ARGV[4] ~= '' and redis.call('HINCRBY', KEYS[2], ARGV[4], -1) <= 0 then
      redis.call('HDEL', KEYS[2], ARGV[4])
      flags = flags + 8
    end
    if redis.call('HLEN', KEYS[1]) == 0 then
      redis.call('SREM', KEYS[4], ARGV[9])
      local delay = tonumber(ARGV[10]) or 0
      if delay > 0 and ARGV[8] == '1' then
        redis.call('SET', KEYS[5], '1', 'PX', delay * 2 + 10000)
      end
      flags = flags + 2
    end
  end
end
if ARGV[8] ~= '1' then return 0 end
if changed then
  local msg = ARGV[6]
  if flags >= 4 then msg = string.upper(string.sub(msg, 1, 1)) .. string.sub(msg, 2) end
  if ARGV[11] == 's' then redis.call('SPUBLISH', ARGV[5], msg) else redis.call('PUBLISH', ARGV[5], msg) end
end
return flags
