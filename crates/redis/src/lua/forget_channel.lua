-- Redis Cluster (decision 0021): removes one node's presence members of one
-- channel, in the channel's slot (forget.lua does every channel at once,
-- which a cluster cannot: the channels live in other slots).
-- KEYS[1] the node's members of the channel (set of member-set entries),
-- KEYS[2] presence hash, KEYS[3] users hash, KEYS[4] the channel's
-- occupied marker (set)
-- ARGV[1] node id, ARGV[2] mode ('dead', 'leave' or 'repair': silent),
-- ARGV[3] topic (a shard channel), ARGV[4] channel
-- Returns {members removed, then per removed member (except when
-- repairing) the channel, its transitions as member.lua counts them, its
-- user}: the shape of forget.lua's reply.
local n = 0
local out = {0}
for _, entry in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local len, rest = string.match(entry, '^(%d+):(.*)$')
  if len then
    local client = string.sub(rest, tonumber(len) + 1)
    local member = redis.call('HGET', KEYS[2], client)
    if member then
      local flags = 0
      redis.call('HDEL', KEYS[2], client)
      local ulen, mrest = string.match(member, '^(%d+):(.*)$')
      local user = ''
      if ulen then user = string.sub(mrest, 1, tonumber(ulen)) end
      if user ~= '' and redis.call('HINCRBY', KEYS[3], user, -1) <= 0 then
        redis.call('HDEL', KEYS[3], user)
        flags = flags + 8
      end
      if redis.call('HLEN', KEYS[2]) == 0 then
        redis.call('SREM', KEYS[4], ARGV[4])
        flags = flags + 2
      end
      if ARGV[2] ~= 'repair' then
        local kind = 'l:'
        if flags >= 4 then kind = 'L:' end
        redis.call('SPUBLISH', ARGV[3], kind .. ARGV[1] .. ':' .. member)
        out[#out + 1] = ARGV[4]
        out[#out + 1] = flags
        out[#out + 1] = user
      end
      n = n + 1
    end
  end
end
redis.call('DEL', KEYS[1])
out[1] = n
return out
