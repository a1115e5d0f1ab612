-- lock_extend.lua: push a token lock's expiry out only if it still holds our token.
-- Race closed: a holder whose lock expired extending the successor's lock (and both then
-- believing they hold it).
-- keys: the lock
-- argv: token ttl_ms
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
