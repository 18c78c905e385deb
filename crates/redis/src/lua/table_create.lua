-- Tables created over HTTP in a cluster (decision 0009, "Which tables
-- exist"): ids from the cluster's counter, never below the configured
-- tables' (1..N), written into the registry with their spec in one step.
-- KEYS[1] registry hash (id -> spec), KEYS[2] id counter, KEYS[3] the
-- registry's version (every node re-reads the registry when it changes)
-- ARGV[1] configured tables N, ARGV[2] how many, ARGV[3] spec (JSON)
-- Returns the first new id (the others follow it).
local n = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < n then cur = n end
local count = tonumber(ARGV[2])
for i = 1, count do
  redis.call('HSET', KEYS[1], string.format('%d', cur + i), ARGV[3])
end
redis.call('SET', KEYS[2], string.format('%d', cur + count))
redis.call('INCR', KEYS[3])
return cur + 1
