-- Claims a game table's lease if nobody holds it (decision 0009), atomically
-- with a new fencing token and a read of the table's saved state.
-- KEYS[1] lease (string 'NODE:TOKEN'), KEYS[2] fence counter, KEYS[3] state
-- hash {tok, t, v}, KEYS[4] the Sentinel fail-over epoch (decision 0020;
-- absent: 0)
-- ARGV[1] node id, ARGV[2] lease ms, ARGV[3] token floor: the highest token
-- the caller has seen for the table, so tokens never go backwards even when
-- Redis lost the counter. Tokens are at least epoch * 2^32 + 1: a fail-over
-- that lost the counter's last increments starts above every token the
-- old master issued, so none is issued twice.
-- ARGV[4]: in a Redis Cluster (decision 0021), the config epoch of the
-- slot's master, which plays the part of KEYS[4] (the higher counts).
-- Returns {0, holder} when held, else {1, token, now ms (Redis clock),
-- saved tok, saved t, saved v} (the last three nil when nothing is saved).
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder} end
local tok = redis.call('INCR', KEYS[2])
local epoch = math.max(tonumber(redis.call('GET', KEYS[4]) or '0'), tonumber(ARGV[4] or '0') or 0)
local floor = math.max(tonumber(ARGV[3]), epoch * 4294967296)
if tok <= floor then
  tok = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', tok))
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', tok), 'PX', ARGV[2])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local s = redis.call('HMGET', KEYS[3], 'tok', 't', 'v')
return {1, tok, now, s[1], s[2], s[3]}
