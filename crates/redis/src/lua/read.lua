-- A channel's position and, optionally, its retained publications after one.
-- KEYS[1] meta hash, KEYS[2] stream, KEYS[3] the Sentinel fail-over epoch
-- (as in publish.lua: an epoch made before a fail-over is replaced by
-- ARGV[2], whatever ARGV[1] says, since the stream may have lost its tail)
-- ARGV[1] create: '1' gives a channel with no epoch the epoch ARGV[2]
-- (subscribe: a subscriber's position must name the stream it will see)
-- ARGV[3] entries: '1' to return publications, ARGV[4] epoch of the asked
-- position, ARGV[5] its offset ('' for none), ARGV[6] limit (0: all),
-- ARGV[7] ttl ms (0: none; also refreshes the meta's expiry on create),
-- ARGV[8] the shard's fail-over epoch when KEYS[3] is not given (a Redis
-- Cluster, decision 0021), ARGV[9] the slot master's lineage (as in
-- publish.lua: the meta's 'r' decides whether a fail-over came between)
-- Returns {epoch, top, offset, data, offset, data, ...}, oldest first,
-- without publications older than the ttl.
local lin = ARGV[9] or ''
local f, mine = failover(KEYS[3], ARGV[8], lin)
local m = redis.call('HMGET', KEYS[1], 'e', 'o', 'f', 'r')
local e = m[1]
local top = tonumber(m[2] or '0')
local ttl = tonumber(ARGV[7])
if e then
  e = checked_epoch(KEYS[1], e, m[3], m[4], ARGV[2], f, mine, lin)
else
  if ARGV[1] ~= '1' then return {'', 0} end
  e = first_epoch(KEYS[1], ARGV[2], f, mine, 'o', 0)
  top = 0
end
if ARGV[1] == '1' and ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
local out = {e, top}
if ARGV[3] ~= '1' then return out end
local from = 1
if ARGV[5] ~= '' and ARGV[4] == e then from = tonumber(ARGV[5]) + 1 end
if from > top then return out end
local entries = redis.call('XRANGE', KEYS[2], string.format('%d-0', from), '+')
local oldest = 0
if ttl > 0 then
  local t = redis.call('TIME')
  oldest = t[1] * 1000 + math.floor(t[2] / 1000) - ttl
end
local limit = tonumber(ARGV[6])
local n = 0
for _, entry in ipairs(entries) do
  local f = entry[2]
  local at, data = 0, ''
  for i = 1, #f, 2 do
    if f[i] == 't' then at = tonumber(f[i + 1]) elseif f[i] == 'd' then data = f[i + 1] end
  end
  if at > oldest then
    local id = entry[1]
    out[#out + 1] = string.sub(id, 1, string.find(id, '-', 1, true) - 1)
    out[#out + 1] = data
    n = n + 1
    if limit > 0 and n >= limit then break end
  end
end
return out
