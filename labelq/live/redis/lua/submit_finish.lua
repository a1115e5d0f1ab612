-- submit_finish.lua (SUBMIT_FINISH): move a reservation to "done" once its label is in SQL.
-- Race closed: counting a label twice (a retry, the reaper finishing a stalled submit) — the
-- lease hash is the token: whoever deletes it moves the counters, a second call finds
-- nothing and does nothing. Lost wake-ups: apply_wanted is set (NX) in the same script,
-- after the commit, and only the call that set it wakes the applier.
-- keys: lease:{a} leases nlabels reserved spent reserved_cost pending parked [apply_wanted]
-- argv: assignment_id cap [wanted_ttl_ms]
-- returns 0 (nothing to finish), 1 (finished), 2 (finished and it set apply_wanted: the
-- caller must wake the applier)
local lease = redis.call('HMGET', KEYS[1], 'task', 'gold', 'cost')
if not lease[1] then return 0 end
local task = lease[1]
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local done = redis.call('HINCRBY', KEYS[3], task, 1)
redis.call('HINCRBY', KEYS[4], task, -1)
redis.call('INCRBYFLOAT', KEYS[5], lease[3])
redis.call('INCRBYFLOAT', KEYS[6], -tonumber(lease[3]))
local cap = tonumber(ARGV[2])
if lease[2] == '0' and cap >= 0 and done >= cap then
  redis.call('ZREM', KEYS[7], task)
  redis.call('ZREM', KEYS[8], task)
end
if KEYS[9] and redis.call('SET', KEYS[9], 1, 'NX', 'PX', ARGV[3]) then return 2 end
return 1
