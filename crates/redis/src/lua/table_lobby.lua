-- A table's lobby entry published by its owner (decision 0009): the next
-- number of the cluster's lobby sequence, the entry kept in the lobby hash
-- (for nodes that start or missed a message) and published to every node,
-- in one step, so the sequence order is the order every node receives.
-- Fenced like a save: only the lease holder publishes.
-- KEYS[1] lease, KEYS[2] sequence counter, KEYS[3] lobby hash, KEYS[4] the
-- Sentinel fail-over epoch (decision 0020: numbers after a fail-over start
-- above epoch * 2^32, so a counter that lost its last increments never
-- numbers an entry below one a node already has)
-- ARGV[1] 'NODE:TOKEN', ARGV[2] table id, ARGV[3] entry, ARGV[4] topic
-- ARGV[5]: in a Redis Cluster (decision 0021), the config epoch of the
-- slot's master, which plays the part of KEYS[4] (the higher counts).
-- Returns the sequence number, or 0 when fenced.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local seq = redis.call('INCR', KEYS[2])
local epoch = math.max(tonumber(redis.call('GET', KEYS[4]) or '0'), tonumber(ARGV[5] or '0') or 0)
local floor = epoch * 4294967296
if seq <= floor then
  seq = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', seq))
end
local msg = string.format('%d', seq) .. ':' .. ARGV[2] .. ':' .. ARGV[3]
redis.call('HSET', KEYS[3], ARGV[2], msg)
redis.call('PUBLISH', ARGV[4], msg)
return seq
