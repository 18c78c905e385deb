-- Saves a table's state if, and only if, the caller still holds its lease
-- with this token: the fence that stops a stale owner (paused, partitioned,
-- back from the dead) from writing over its successor.
-- KEYS[1] lease, KEYS[2] state hash
-- ARGV[1] 'NODE:TOKEN', ARGV[2] token, ARGV[3] state
-- Returns {1, now ms (Redis clock)} when saved, {0, holder or nil} when fenced.
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then return {0, holder} end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[2], 'tok', ARGV[2], 't', string.format('%d', now), 'v', ARGV[3])
return {1, now}
