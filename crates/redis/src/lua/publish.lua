-- Publishes one message: next offset, stream entry, live message, atomically.
-- KEYS[1] meta hash {e = epoch, o = last offset, f = fail-over epoch the
-- epoch was made under}, KEYS[2] stream, KEYS[3] the Sentinel fail-over
-- epoch (decision 0020; absent: 0). In a Redis Cluster (decision 0021)
-- KEYS[3] is not given (it would be in another slot) and ARGV[6], the
-- config epoch of the slot's master, takes its place.
-- ARGV[1] data, ARGV[2] epoch to use if the channel has none (or a fail-over
-- since its epoch was made may have lost some of it), ARGV[3] history
-- size (0: no stream), ARGV[4] ttl ms (0: none), ARGV[5] topic, ARGV[6]
-- the shard's fail-over epoch when KEYS[3] is not given, ARGV[7] 's' to
-- SPUBLISH (a Redis Cluster's shard channel, decision 0021) instead of
-- PUBLISH, ARGV[8] a classic topic to PUBLISH on as well ('' none: the
-- pattern topic while some node has a wildcard subscription), ARGV[9] the
-- slot master's lineage in a Redis Cluster ('REPLID;,OTHER,...,', '' when
-- unknown or outside a cluster; decision 0021): the meta's 'r' names the
-- lineage that last wrote it (epoch_common.lua, prepended, decides).
local lin = ARGV[9] or ''
local f, mine = failover(KEYS[3], ARGV[6], lin)
local m = redis.call('HMGET', KEYS[1], 'e', 'f', 'r')
local e = m[1]
if e then
  e = checked_epoch(KEYS[1], e, m[2], m[3], ARGV[2], f, mine, lin)
else
  e = first_epoch(KEYS[1], ARGV[2], f, mine)
end
local o = redis.call('HINCRBY', KEYS[1], 'o', 1)
local size = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
if size > 0 then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('XADD', KEYS[2], 'MAXLEN', size, string.format('%d-0', o), 't', now, 'd', ARGV[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
local msg = 'p:' .. e .. ':' .. string.format('%d', o) .. ':' .. ARGV[1]
if ARGV[7] == 's' then
  redis.call('SPUBLISH', ARGV[5], msg)
else
  redis.call('PUBLISH', ARGV[5], msg)
end
if ARGV[8] and ARGV[8] ~= '' then redis.call('PUBLISH', ARGV[8], msg) end
return {e, o}
