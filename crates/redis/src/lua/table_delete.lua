-- A table deleted in a cluster (decision 0009), in one step: its registry
-- entry removed (or, for a configured table 1..N, nothing to remove), its id
-- added to the deleted set that every keeper reads, its lobby entry replaced
-- by a removal ('SEQ:ID:' with no entry) numbered and published like any
-- lobby entry. When nobody holds the lease (the owner died), the lease
-- becomes the sentinel, which never expires: no claim can ever win it.
-- When a node holds it, the lease is left to that owner, which closes the
-- table (its players told) and then turns its lease into the sentinel
-- (table_retire.lua).
-- KEYS[1] registry, KEYS[2] deleted set, KEYS[3] lease, KEYS[4] lobby
-- sequence, KEYS[5] lobby hash, KEYS[6] the registry's version, KEYS[7] the
-- Sentinel fail-over epoch (as in table_lobby.lua)
-- ARGV[1] table id, ARGV[2] configured tables N, ARGV[3] sentinel,
-- ARGV[4] lobby topic
-- ARGV[5]: in a Redis Cluster (decision 0021), the config epoch of the
-- slot's master, which plays the part of KEYS[7] (the higher counts).
-- Returns {0} for an unknown (or already deleted) table, else {1, holder}
-- (holder nil when nobody held the lease).
local id = ARGV[1]
if redis.call('SISMEMBER', KEYS[2], id) == 1 then return {0} end
local listed = redis.call('HDEL', KEYS[1], id) == 1
local n = tonumber(id)
if not listed and not (n and n >= 1 and n <= tonumber(ARGV[2])) then return {0} end
redis.call('SADD', KEYS[2], id)
redis.call('INCR', KEYS[6])
local holder = redis.call('GET', KEYS[3])
if not holder then redis.call('SET', KEYS[3], ARGV[3]) end
local seq = redis.call('INCR', KEYS[4])
local epoch = math.max(tonumber(redis.call('GET', KEYS[7]) or '0'), tonumber(ARGV[5] or '0') or 0)
local floor = epoch * 4294967296
if seq <= floor then
  seq = floor + 1
  redis.call('SET', KEYS[4], string.format('%d', seq))
end
local msg = string.format('%d', seq) .. ':' .. id .. ':'
redis.call('HSET', KEYS[5], id, msg)
redis.call('PUBLISH', ARGV[4], msg)
return {1, holder}
