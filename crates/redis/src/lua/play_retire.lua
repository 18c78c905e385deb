-- An empty table made by play asks to close (protocol §5f): yes when no
-- seat is counted, or none was reserved for the settle time; it then
-- leaves every count (never matched or found by its code again).
-- KEYS[1] P:play:count (declared so that a Redis Cluster routes the script
-- to the slot of the play keys, decision 0021; read through the prefix)
-- ARGV[1] prefix, ARGV[2] table, ARGV[3] settle ms
-- Returns 1 (close) or 0 (a seat is on its way: stay open).
local t = ARGV[2]
local f = redis.call('HMGET', meta(t), 'n', 'last')
if f[1] and tonumber(f[1]) > 0 and now_ms() - tonumber(f[2]) < tonumber(ARGV[3]) then
  return 0
end
forget(t)
return 1
