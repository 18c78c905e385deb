-- Gives a table's lease up (a node shutting down cleanly), if still held
-- with this value, so another node can claim it without waiting for expiry.
-- KEYS[1] lease; ARGV[1] 'NODE:TOKEN'. Returns 1 if released, 0 if not held.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
