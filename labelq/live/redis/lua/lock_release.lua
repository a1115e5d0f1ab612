-- lock_release.lua: delete a token lock only if it still holds our token.
-- Race closed: a holder whose lock expired (and was taken by the next holder) deleting the
-- successor's lock, as a plain GET-then-DEL would.
-- keys: the lock
-- argv: token
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
