-- A node's heartbeat. Returns {1 if the node was not registered (new, or
-- taken for dead), ids of nodes silent for longer than ARGV[3] ms...}.
-- KEYS[1] zset node -> last heartbeat (ms, Redis clock), KEYS[2] hash node -> stats
-- ARGV[1] node id, ARGV[2] stats JSON, ARGV[3] dead after ms
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local added = redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local out = {added}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[3])))) do
  out[#out + 1] = id
end
return out
