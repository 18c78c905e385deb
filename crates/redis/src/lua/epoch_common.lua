-- What publish.lua and read.lua share (decisions 0020 and 0021): whether a
-- channel's epoch, the meta hash's 'e', may have lost writes to a fail-over
-- since it was made, in which case the channel starts a new epoch.
-- The meta's 'f' is the fail-over epoch it was written under: KEYS[3] on
-- Sentinel, the slot master's config epoch in a Redis Cluster (KEYS[3]
-- is not given there: it would be in another slot). Its 'r' names the
-- lineage that last wrote it ('REPLID;,OTHER,...,' is the slot master's,
-- '' when unknown or outside a cluster). Written by this one: whole.
-- Written by another live master's: the keys came whole by MIGRATE (a
-- resharding). Any other (the master this one replaced, or one unknown):
-- a fail-over may have lost writes. Without lineages the fail-over epochs
-- decide.

-- The fail-over epoch and this master's lineage id (nil outside a cluster
-- or when unknown), from KEYS[3] or `shard_epoch`, and `lineage`.
local function failover(key, shard_epoch, lineage)
  local f
  if key then f = redis.call('GET', key) or '0' else f = shard_epoch or '0' end
  local mine = nil
  if lineage ~= '' then
    mine = string.sub(lineage, 1, (string.find(lineage, ';', 1, true) or 1) - 1)
  end
  return f, mine
end

-- The epoch `meta` should have: its own `e` if nothing since it was written
-- (under fail-over epoch `mf`, by lineage `mr`) can have lost writes, else
-- `fresh`, written there. A meta written by another lineage that came whole
-- is taken over by this one.
local function checked_epoch(meta, e, mf, mr, fresh, f, mine, lineage)
  local stale
  if mine and mr then
    stale = mr ~= mine and not string.find(lineage, ',' .. mr .. ',', 1, true)
  else
    stale = tonumber(mf or '0') < tonumber(f)
  end
  if stale then
    redis.call('HSET', meta, 'e', fresh, 'f', f)
    if mine then redis.call('HSET', meta, 'r', mine) end
    return fresh
  end
  if mine and mr ~= mine then redis.call('HSET', meta, 'r', mine, 'f', f) end
  return e
end

-- A channel's first epoch, `e`, written to `meta` with what else it needs.
local function first_epoch(meta, e, f, mine, ...)
  redis.call('HSET', meta, 'e', e, 'f', f, ...)
  if mine then redis.call('HSET', meta, 'r', mine) end
  return e
end
