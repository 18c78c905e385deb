-- Removes a node's presence members (and, unless repairing, the node).
-- KEYS[1] zset of nodes, KEYS[2] hash of node stats, KEYS[3] its member set
-- ARGV[1] node id, ARGV[2] key prefix, ARGV[3] mode:
--   'dead'   a silent node: whoever removes it from the zset does the work
--            (the others get {0}), and each member is announced as a leave
--   'leave'  a node stopping: removed, members announced as leaves
--   'repair' a node re-registering its members: stays registered, silent
-- Returns {members removed, then per removed member (except when repairing)
-- its channel, its transitions as member.lua counts them, its user}.
local mode = ARGV[3]
if mode ~= 'repair' then
  if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 and mode == 'dead' then return {0} end
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local n = 0
local out = {0}
for _, entry in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  -- entry: <channel length>:<channel><client id>
  local len, rest = string.match(entry, '^(%d+):(.*)$')
  if len then
    len = tonumber(len)
    local channel = string.sub(rest, 1, len)
    local client = string.sub(rest, len + 1)
    local base = ARGV[2] .. ':{' .. channel .. '}'
    local member = redis.call('HGET', base .. ':p', client)
    if member then
      local flags = 0
      redis.call('HDEL', base .. ':p', client)
      -- member: <user length>:<user>...
      local ulen, mrest = string.match(member, '^(%d+):(.*)$')
      local user = ''
      if ulen then user = string.sub(mrest, 1, tonumber(ulen)) end
      if user ~= '' and redis.call('HINCRBY', base .. ':u', user, -1) <= 0 then
        redis.call('HDEL', base .. ':u', user)
        flags = flags + 8
      end
      if redis.call('HLEN', base .. ':p') == 0 then
        local ns = string.match(channel, '^([^:]*):') or ''
        redis.call('SREM', ARGV[2] .. ':occupied:' .. ns, channel)
        flags = flags + 2
      end
      if mode ~= 'repair' then
        local kind = 'l:'
        if flags >= 4 then kind = 'L:' end
        redis.call('PUBLISH', ARGV[2] .. ':c:' .. channel, kind .. ARGV[1] .. ':' .. member)
        out[#out + 1] = channel
        out[#out + 1] = flags
        out[#out + 1] = user
      end
      n = n + 1
    end
  end
end
redis.call('DEL', KEYS[3])
out[1] = n
return out
