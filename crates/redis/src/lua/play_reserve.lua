-- A seat for a play (protocol §5f), counted atomically with the choice of
-- table and, when a table must be made, with its registration in the
-- cluster's registry (as table_create.lua does): 200 players asking at
-- once on any nodes fill exactly ceil(200/seats) tables.
-- KEYS[1] registry hash, KEYS[2] id counter, KEYS[3] registry version,
-- KEYS[4] deleted set
-- ARGV[1] prefix, ARGV[2] mode ('join', 'private' or 'code'), ARGV[3] the
-- matching key (or the code), ARGV[4] seats, ARGV[5] user, ARGV[6] the new
-- table's spec (registry JSON), ARGV[7] configured tables N, ARGV[8] max
-- tables, ARGV[9] max tables per user, ARGV[10] a new private table's code
-- Returns {table, created 0/1, code} or {0, why, n}: why 121 unknown code,
-- 116 full, 1071 tables cap (n open), 1072 user cap (n created), 1073 code
-- in use (choose another).
local mode = ARGV[2]
local now = now_ms()
local deleted = KEYS[4]
-- Counts a seat at t; false when it has none free.
local function take(t)
  local m = meta(t)
  local f = redis.call('HMGET', m, 'n', 'seats', 'key', 'code')
  if not f[1] then return false end
  local n, seats = tonumber(f[1]), tonumber(f[2])
  if n >= seats then return false end
  n = n + 1
  redis.call('HSET', m, 'n', n, 'last', now)
  if n >= seats and f[4] == '' then redis.call('ZREM', open_key(f[3]), t) end
  return true
end
if mode == 'code' then
  local t = redis.call('HGET', P .. ':play:codes', ARGV[3])
  if not t then return {0, 121, 0} end
  if redis.call('SISMEMBER', deleted, t) == 1 then
    forget(t)
    return {0, 121, 0}
  end
  if not take(t) then return {0, 116, 0} end
  return {tonumber(t), 0, ARGV[3]}
end
if mode == 'join' then
  local open = open_key(ARGV[3])
  while true do
    local t = redis.call('ZRANGE', open, 0, 0)[1]
    if not t then break end
    if redis.call('SISMEMBER', deleted, t) == 1 then
      forget(t)
      redis.call('ZREM', open, t)
    elseif take(t) then
      return {tonumber(t), 0, ''}
    else
      redis.call('ZREM', open, t)
    end
  end
end
local count = tonumber(redis.call('GET', P .. ':play:count') or '0')
if count >= tonumber(ARGV[8]) then return {0, 1071, count} end
local mine = tonumber(redis.call('HGET', P .. ':play:users', ARGV[5]) or '0')
if mine >= tonumber(ARGV[9]) then return {0, 1072, mine} end
local code = ''
if mode == 'private' then
  code = ARGV[10]
  if redis.call('HEXISTS', P .. ':play:codes', code) == 1 then return {0, 1073, 0} end
end
local n = tonumber(ARGV[7])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < n then cur = n end
local t = cur + 1
local id = string.format('%d', t)
redis.call('HSET', KEYS[1], id, ARGV[6])
redis.call('SET', KEYS[2], id)
redis.call('INCR', KEYS[3])
redis.call('HSET', meta(id), 'key', ARGV[3], 'seats', ARGV[4], 'n', 1, 'last', now,
  'creator', ARGV[5], 'code', code)
if code ~= '' then
  redis.call('HSET', P .. ':play:codes', code, id)
elseif tonumber(ARGV[4]) > 1 then
  redis.call('ZADD', open_key(ARGV[3]), t, id)
end
redis.call('INCR', P .. ':play:count')
redis.call('HINCRBY', P .. ':play:users', ARGV[5], 1)
return {t, 1, code}
