-- Publishes one message: next offset, stream entry, live message, atomically.
-- KEYS[1] meta hash {e = epoch, o = last offset}, KEYS[2] stream
-- ARGV[1] data, ARGV[2] epoch to use if the channel has none, ARGV[3] history
-- size (0: no stream), ARGV[4] ttl ms (0: none), ARGV[5] topic
local e = redis.call('HGET', KEYS[1], 'e')
if not e then
  e = ARGV[2]
  redis.call('HSET', KEYS[1], 'e', e)
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
redis.call('PUBLISH', ARGV[5], 'p:' .. e .. ':' .. string.format('%d', o) .. ':' .. ARGV[1])
return {e, o}
