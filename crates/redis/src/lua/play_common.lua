-- Tables on demand (protocol §5f; herald-redis play.rs): what every play
-- script shares. Keys, prefix P (ARGV[1] of every play script):
-- P:play:t:{T} (hash: key, seats, n = seats counted, last = Redis ms of
-- the last reservation, creator, code), P:play:open:KEY (sorted set of the
-- public tables of KEY with a seat not counted, by id), P:play:codes (hash
-- code -> table), P:play:users (hash creator -> tables open),
-- P:play:count (tables open).
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local function meta(t) return P .. ':play:t:' .. t end
local function open_key(key) return P .. ':play:open:' .. key end
-- Table t leaves every count (closed, deleted).
local function forget(t)
  local m = meta(t)
  local f = redis.call('HMGET', m, 'key', 'code', 'creator')
  if f[1] then redis.call('ZREM', open_key(f[1]), t) end
  if f[2] and f[2] ~= '' then redis.call('HDEL', P .. ':play:codes', f[2]) end
  if f[3] then
    if redis.call('HINCRBY', P .. ':play:users', f[3], -1) <= 0 then
      redis.call('HDEL', P .. ':play:users', f[3])
    end
  end
  if redis.call('DEL', m) == 1 then
    if redis.call('DECR', P .. ':play:count') < 0 then redis.call('SET', P .. ':play:count', 0) end
  end
end
