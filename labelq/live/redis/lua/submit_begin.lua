-- submit_begin.lua (SUBMIT_BEGIN): validate a lease and mark it being submitted.
-- Race closed: the reaper expiring a lease whose label is being written to SQL — the lease
-- (exists, this worker's, not expired) is checked and marked 'submitting' atomically, and
-- the reaper leaves a submitting lease alone until its grace runs out.
-- keys: lease:{a}
-- argv: worker now_ms
local lease = redis.call('HMGET', KEYS[1], 'task', 'worker', 'gold', 'cost', 'expires', 'tid')
if not lease[1] then return {'missing'} end
if lease[2] ~= ARGV[1] then return {'forbidden'} end
if tonumber(lease[5]) < tonumber(ARGV[2]) then return {'expired'} end
redis.call('HSET', KEYS[1], 'submitting', ARGV[2])
return {'ok', lease[1], lease[3], lease[4], lease[6] or ''}
