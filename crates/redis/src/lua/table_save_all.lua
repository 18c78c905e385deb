-- Saves several tables' states in one call (group commit across a node's
-- tables), each if, and only if, the caller still holds that table's lease
-- with that token, as table_save.lua does for one: a table found fenced is
-- skipped and reported, the others are saved.
-- KEYS[2i-1] table i's lease, KEYS[2i] its state hash
-- ARGV[3i-2] 'NODE:TOKEN', ARGV[3i-1] token, ARGV[3i] state
-- Returns {now ms (Redis clock), r1, r2, ...}: ri is 1 when table i was
-- saved, else the lease's holder (nil: nobody holds it).
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local nowtext = string.format('%d', now)
local out = {now}
for i = 1, #KEYS / 2 do
  local holder = redis.call('GET', KEYS[2 * i - 1])
  if holder == ARGV[3 * i - 2] then
    redis.call('HSET', KEYS[2 * i], 'tok', ARGV[3 * i - 1], 't', nowtext, 'v', ARGV[3 * i])
    out[i + 1] = 1
  else
    out[i + 1] = holder
  end
end
return out
