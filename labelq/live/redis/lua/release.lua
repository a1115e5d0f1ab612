-- release.lua (RELEASE): return a lease or held reservation to the pool (decline, expiry,
-- reclaim).
-- Race closed: returning a task twice (the lease hash is the token), releasing a lease
-- mid-submission unless the caller checked SQL for its label (allow_submitting), and
-- reclaiming a reservation its worker has taken meanwhile (held_only).
-- keys: lease:{a} leases reserved wcount reserved_cost pending parked nissued declining
-- argv: assignment_id worker('' = any) expired_before_ms('' = no check) allow_submitting
--       key_prefix held_only('1': only a reservation still held in an inbox)
--       declined_ms ('' = not a decline; else the decline is noted in declining, with the
--       release, until its SQL row and its entry in declines are written: labelq.live.decline)
--       keep_decision ('1': a held reservation of an ordinary task, taken back for another
--       worker, leaves its worker owed an ordinary-task decision: nissued 'o' .. worker)
-- answers {1, task, worker, held (1/0), task_id ('' if the lease has none), gold, expires}
-- or {0, reason}.
-- A reservation still held in an inbox (never popped) was never issued: its count in
-- nissued (and the gold counters) is taken back and the task leaves the worker's seen set,
-- so the gold schedule and the gold pool see only what the annotator was really given.
local lease = redis.call('HMGET', KEYS[1], 'task', 'worker', 'cost', 'expires', 'submitting',
                         'held', 'gold', 'cat', 'tid')
if not lease[1] then return {0, 'missing'} end
if ARGV[2] ~= '' and lease[2] ~= ARGV[2] then return {0, 'forbidden'} end
if lease[5] and ARGV[4] ~= '1' then return {0, 'submitting'} end
if ARGV[3] ~= '' and tonumber(lease[4]) >= tonumber(ARGV[3]) then return {0, 'live'} end
if ARGV[6] == '1' and not lease[6] then return {0, 'issued'} end
local task = lease[1]
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], task, -1)
redis.call('HINCRBY', KEYS[4], lease[2], -1)
redis.call('INCRBYFLOAT', KEYS[5], -tonumber(lease[3]))
if lease[6] then
  redis.call('SREM', ARGV[5] .. 'seen:' .. lease[2], task)
  redis.call('HINCRBY', KEYS[8], lease[2], -1)
  if lease[7] ~= '1' and ARGV[8] == '1' then
    redis.call('HINCRBY', KEYS[8], 'o' .. lease[2], 1)
  end
  if lease[7] == '1' then
    redis.call('HINCRBY', KEYS[8], 'g' .. lease[2], -1)
    if lease[8] and lease[8] ~= '' then
      redis.call('HINCRBY', KEYS[8], 'g' .. lease[2] .. ':' .. lease[8], -1)
    end
  end
end
if ARGV[7] and ARGV[7] ~= '' then
  redis.call('HSET', KEYS[9], ARGV[1], task .. ':' .. lease[2] .. ':' .. (lease[9] or '') ..
             ':' .. (lease[7] or '0') .. ':' .. ARGV[7])
end
local s = redis.call('ZSCORE', KEYS[7], task)
if s then
  redis.call('ZREM', KEYS[7], task)
  redis.call('ZADD', KEYS[6], s, task)
end
return {1, task, lease[2], lease[6] and 1 or 0, lease[9] or '', lease[7] or '0', lease[4]}
