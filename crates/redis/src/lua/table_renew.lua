-- Renews the leases a node holds, in one call for all its tables.
-- KEYS lease keys; ARGV[1] lease ms, ARGV[1 + i] the value KEYS[i] must hold
-- ('NODE:TOKEN').
-- Returns the positions (1-based) of the leases no longer held: expired, or
-- taken by another node. Those tables are lost to the caller.
local lost = {}
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[i + 1] then
    redis.call('PEXPIRE', k, ARGV[1])
  else
    lost[#lost + 1] = i
  end
end
return lost
