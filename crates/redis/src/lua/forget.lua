-- Removes a node (dead, or stopping) and every presence entry it left,
-- announcing each as a leave. Whoever removes it from the zset does the work.
-- KEYS[1] zset of nodes, KEYS[2] hash of node stats, KEYS[3] its member set
-- ARGV[1] node id, ARGV[2] key prefix, ARGV[3] '1' = even if not in the zset
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 and ARGV[3] ~= '1' then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
local n = 0
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
      redis.call('HDEL', base .. ':p', client)
      -- member: <user length>:<user>...
      local ulen, mrest = string.match(member, '^(%d+):(.*)$')
      local user = ''
      if ulen then user = string.sub(mrest, 1, tonumber(ulen)) end
      if user ~= '' and redis.call('HINCRBY', base .. ':u', user, -1) <= 0 then
        redis.call('HDEL', base .. ':u', user)
      end
      redis.call('PUBLISH', ARGV[2] .. ':c:' .. channel, 'l:' .. ARGV[1] .. ':' .. member)
      n = n + 1
    end
  end
end
redis.call('DEL', KEYS[3])
return n
