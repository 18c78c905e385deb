-- A node's heartbeat. Returns {1 if the node was not registered (new, or
-- taken for dead), ids of nodes silent for longer than ARGV[3] ms...}.
-- KEYS[1] zset node -> last heartbeat (ms, Redis clock), KEYS[2] hash node -> stats
-- ARGV[1] node id, ARGV[2] stats JSON, ARGV[3] dead after ms, ARGV[4] the
-- heartbeat period in ms (absent or 0: no outage correction)
-- A node's silence is counted without the time nobody could beat: when no
-- node at all has beaten for more than two periods, Redis (or, in a Redis
-- Cluster, this slot's master) was out of reach of every node -- a
-- fail-over, a stall -- and every recorded beat moves forward by that gap.
-- Without it, the first node to beat after an outage longer than ARGV[3]
-- took every other live node for dead and announced their members' leaves.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local period = tonumber(ARGV[4] or '0') or 0
if period > 0 then
  local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if last[2] then
    local gap = now - tonumber(last[2])
    if gap > 2 * period then
      local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
      for i = 1, #all, 2 do
        redis.call('ZADD', KEYS[1], tonumber(all[i + 1]) + gap, all[i])
      end
    end
  end
end
local added = redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local out = {added}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[3])))) do
  out[#out + 1] = id
end
return out
