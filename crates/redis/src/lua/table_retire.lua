-- The owner of a deleted table closed it: its lease becomes the sentinel
-- (never expires, so no keeper claims the table again, even after a
-- restart), and the lobby removal is published again (the owner may have
-- published an entry after table_delete.lua's removal).
-- KEYS[1] lease, KEYS[2] lobby sequence, KEYS[3] lobby hash, KEYS[4] the
-- Sentinel fail-over epoch (as in table_lobby.lua)
-- ARGV[1] 'NODE:TOKEN', ARGV[2] sentinel, ARGV[3] table id, ARGV[4] topic
-- ARGV[5]: in a Redis Cluster (decision 0021), the config epoch of the
-- slot's master, which plays the part of KEYS[4] (the higher counts).
-- Returns 1, or 0 when another node holds the lease (it claimed the table
-- after the caller's lease expired; its keeper closes it in turn).
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] and holder ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
local seq = redis.call('INCR', KEYS[2])
local epoch = math.max(tonumber(redis.call('GET', KEYS[4]) or '0'), tonumber(ARGV[5] or '0') or 0)
local floor = epoch * 4294967296
if seq <= floor then
  seq = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', seq))
end
local msg = string.format('%d', seq) .. ':' .. ARGV[3] .. ':'
redis.call('HSET', KEYS[3], ARGV[3], msg)
redis.call('PUBLISH', ARGV[4], msg)
return 1
