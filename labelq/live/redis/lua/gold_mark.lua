-- gold_mark.lua (GOLD_MARK): ordinary tasks become gold questions (labelq gold mark).
-- Race closed: a task leased, or held in an inbox, as an ordinary task while it becomes
-- gold (its label would be recorded as an ordinary one). Refused, changing nothing, while
-- any of the tasks has a live lease; otherwise they leave pending and parked and join gold
-- in this one step, so no lease can be issued for them as ordinary tasks from now on.
-- keys: reserved pending parked gold
-- argv: task seqs
-- answers {1, score...} (each task's priority in pending or parked, '' where it had none:
-- what to put back if the SQL side fails) or {0, task, live leases}.
for i = 1, #ARGV do
  local n = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if n > 0 then return {0, ARGV[i], n} end
end
local out = {1}
for i = 1, #ARGV do
  local s = redis.call('ZSCORE', KEYS[2], ARGV[i]) or redis.call('ZSCORE', KEYS[3], ARGV[i])
  out[i + 1] = s or ''
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('SADD', KEYS[4], ARGV[i])
end
return out
