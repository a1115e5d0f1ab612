-- reserve.lua (RESERVE): issue a task to a worker, as a lease or a reservation held in
-- their inbox.
-- Race closed: two requests that both *check* "task below the cap / worker below capacity /
-- budget left / not seen" and then both *act* would over-issue. The checks and the
-- increments of reserved, wcount, reserved_cost, seen, nissued and the lease happen here,
-- in one script. Also: a decision made at once on an empty inbox while the applier refilled
-- it ('inbox'), past the worker's bound of open assignments ('open'), or on gold-schedule
-- counts another decision moved meanwhile ('stale').
-- Field encodings (labelq/live/redis/keys.py): nissued 'g' .. w (gold issued to w),
-- 'g' .. w .. ':' .. c (gold of category c issued to w), 'o' .. w (ordinary-task decisions
-- owed to w: an ordinary task issued pays one; deleted at 0).
-- keys: seen:{w} gold nlabels reserved wcount spent reserved_cost lease:{a} leases pending
--       parked nissued [inbox:{w} [open:{w}]]
-- argv: task worker cap capacity cost budget assignment_id expires_ms key_ttl_ms task_id
--       category (index of the task's category, counted per worker for gold)
--       [row: JSON [external id, category, payload] of the task, kept in the lease so that
--       POP_INBOX can answer without a SQL read]
--       [expected issued, expected gold issued: the worker's counts in nissued that the
--       gold schedule's decision was made on ('' for none); if either moved since, 'stale']
--       [mode: 'hold' (default) or 'empty'] [max open, key prefix, now_ms: mode 'empty']
--       (with the 13th key, the worker's inbox: in mode 'hold' the assignment id is appended
--       to it, a held reservation; in mode 'empty' — a decision made at once because the
--       inbox was empty — the script answers 'inbox' if reservations arrived there since,
--       so that the worker gets them first and in the order they were decided; and, with
--       the 14th key, 'open' if the worker holds max open assignments already — another
--       request of theirs issued one meanwhile —, else the lease is recorded there)
--#include open_leases.lua
local task, worker = ARGV[1], ARGV[2]
local cap, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local hold = KEYS[13] and ARGV[15] ~= 'empty'
if KEYS[13] and not hold and redis.call('LLEN', KEYS[13]) > 0 then return {0, 'inbox'} end
local bounded = KEYS[14] and not hold
if bounded and #open_leases(KEYS[14], ARGV[17], worker, tonumber(ARGV[18])) >=
    tonumber(ARGV[16]) then
  return {0, 'open'}
end
if ARGV[13] and ARGV[13] ~= '' and
    (tonumber(redis.call('HGET', KEYS[12], worker) or '0') ~= tonumber(ARGV[13]) or
     tonumber(redis.call('HGET', KEYS[12], 'g' .. worker) or '0') ~= tonumber(ARGV[14])) then
  return {0, 'stale'}
end
if redis.call('SISMEMBER', KEYS[1], task) == 1 then return {0, 'seen'} end
local gold = redis.call('SISMEMBER', KEYS[2], task)
local done = tonumber(redis.call('HGET', KEYS[3], task) or '0')
local live = tonumber(redis.call('HGET', KEYS[4], task) or '0')
if gold == 0 and cap >= 0 and done + live >= cap then return {0, 'cap'} end
if capacity >= 0 and tonumber(redis.call('HGET', KEYS[5], worker) or '0') >= capacity then
  return {0, 'capacity'}
end
if budget >= 0 then
  local spent = tonumber(redis.call('GET', KEYS[6]) or '0')
  local held = tonumber(redis.call('GET', KEYS[7]) or '0')
  if spent + held + cost > budget + 1e-9 then return {0, 'budget'} end
end
redis.call('SADD', KEYS[1], task)
redis.call('HINCRBY', KEYS[4], task, 1)
redis.call('HINCRBY', KEYS[5], worker, 1)
redis.call('HINCRBY', KEYS[12], worker, 1)
if gold == 0 and redis.call('HEXISTS', KEYS[12], 'o' .. worker) == 1 and
    redis.call('HINCRBY', KEYS[12], 'o' .. worker, -1) <= 0 then
  redis.call('HDEL', KEYS[12], 'o' .. worker)
end
if gold == 1 then
  redis.call('HINCRBY', KEYS[12], 'g' .. worker, 1)
  if ARGV[11] and ARGV[11] ~= '' then
    redis.call('HINCRBY', KEYS[12], 'g' .. worker .. ':' .. ARGV[11], 1)
  end
end
redis.call('INCRBYFLOAT', KEYS[7], ARGV[5])
redis.call('HSET', KEYS[8], 'task', task, 'worker', worker, 'gold', gold, 'cost', ARGV[5],
           'expires', ARGV[8], 'tid', ARGV[10])
if ARGV[12] and ARGV[12] ~= '' then redis.call('HSET', KEYS[8], 'row', ARGV[12]) end
redis.call('PEXPIRE', KEYS[8], ARGV[9])
redis.call('ZADD', KEYS[9], ARGV[8], ARGV[7])
if hold then
  -- held in the inbox: not issued to the annotator yet; RELEASE takes the count back
  redis.call('HSET', KEYS[8], 'held', 1, 'cat', ARGV[11])
  redis.call('RPUSH', KEYS[13], ARGV[7])
end
if bounded then open_add(KEYS[14], ARGV[7]) end
if gold == 0 and cap >= 0 and done + live + 1 >= cap then
  local s = redis.call('ZSCORE', KEYS[10], task)
  if s then
    redis.call('ZREM', KEYS[10], task)
    redis.call('ZADD', KEYS[11], s, task)
  end
end
return {1, 'ok'}
