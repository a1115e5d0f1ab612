-- pop_inbox.lua (POP_INBOX): hand out the worker's next held reservation and start its
-- lease now; records the worker as active and counts the request (pace).
-- Race closed: a reservation popped twice, or popped after it was released or its hold ran
-- out (it is skipped); two `next` requests at once both issuing past the bound on open
-- assignments (with open:{w}, the oldest open one is returned again). Also answers
-- 'unbuilt' when the project has no hot state.
-- keys: inbox:{w} active leases meta requests [open:{w}], and lease:{a} of each popped id
--       (named from argv[5]: all in the project's key space)
-- argv: worker now_ms lease_ms key_ttl_ms key_prefix min_left_ms [max_open]
-- returns {} (inbox empty), {'unbuilt'} (no hot state), or {aid, task, expires_ms[, row]}
-- (row: the task's JSON row when the reservation carries it). With open:{w}: when the
-- worker holds max_open open assignments already, the oldest of them is returned again
-- (a repeated next is idempotent: a reload, a retry), else a popped lease is recorded there
--#include open_leases.lua
if redis.call('HEXISTS', KEYS[4], 'built') == 0 then return {'unbuilt'} end
local now = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('HINCRBY', KEYS[5], ARGV[1], 1)
if KEYS[6] then
  local live = open_leases(KEYS[6], ARGV[5], ARGV[1], now)
  if #live > 0 and #live >= tonumber(ARGV[7]) then
    local o = live[1]
    if o[4] then return {o[1], o[2], o[3], o[4]} end
    return {o[1], o[2], o[3]}
  end
end
while true do
  local aid = redis.call('LPOP', KEYS[1])
  if not aid then return {} end
  local lk = ARGV[5] .. 'lease:' .. aid
  local l = redis.call('HMGET', lk, 'task', 'worker', 'expires', 'submitting', 'row')
  if l[1] and l[2] == ARGV[1] and not l[4] and tonumber(l[3]) > now + tonumber(ARGV[6]) then
    local exp = now + tonumber(ARGV[3])
    redis.call('HSET', lk, 'expires', exp)
    redis.call('HDEL', lk, 'held')
    redis.call('PEXPIRE', lk, ARGV[4])
    redis.call('ZADD', KEYS[3], exp, aid)
    if KEYS[6] then open_add(KEYS[6], aid) end
    if l[5] then return {aid, l[1], exp, l[5]} end
    return {aid, l[1], exp}
  end
end
