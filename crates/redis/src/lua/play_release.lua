-- A counted seat of a table made by play is free again (protocol §5f):
-- one seat less, or, when no seat was reserved for the settle time, the
-- table's own count of seated players (a reservation that never reached
-- the table is forgotten). A public table with room is matched again.
-- KEYS[1] P:play:count (declared so that a Redis Cluster routes the script
-- to the slot of the play keys, decision 0021; read through the prefix)
-- ARGV[1] prefix, ARGV[2] table, ARGV[3] players seated, ARGV[4] settle ms
-- Returns the count, or -1 for a table play does not count.
local t = ARGV[2]
local m = meta(t)
local f = redis.call('HMGET', m, 'n', 'last', 'seats', 'key', 'code')
if not f[1] then return -1 end
local n = tonumber(f[1])
if now_ms() - tonumber(f[2]) >= tonumber(ARGV[4]) then
  n = tonumber(ARGV[3])
elseif n > 0 then
  n = n - 1
end
redis.call('HSET', m, 'n', n)
if n < tonumber(f[3]) and f[5] == '' then redis.call('ZADD', open_key(f[4]), tonumber(t), t) end
return n
