-- candidates_many.lua (CANDIDATES_MANY): CANDIDATES for many workers in one call (the
-- applier's batched refill).
-- Race closed: none needed (read-only); RESERVE re-checks every choice.
-- keys: pending nlabels reserved applied seen:{w1} ... seen:{wn}
-- argv: cap count enough_1 ... enough_n
-- CANDIDATES for n workers at once over the top ``count`` of pending: a task's cap and
-- settled checks are made once (on first need) whatever the number of workers, the seen
-- check per worker; each worker's scan stops once it has ``enough_i`` settled candidates
-- (0 = look at all). Returns {eligible_1, settled_1, ..., eligible_n, settled_n}.
--#include task_status.lua
local cap = tonumber(ARGV[1])
local raw = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local state = {}  -- index -> 0 (at the cap), 1 (eligible), 2 (eligible and settled)
local function info(j)
  local s = state[j]
  if not s then
    s = task_status(raw[j], cap, KEYS[2], KEYS[3], KEYS[4])
    state[j] = s
  end
  return s
end
local out = {}
for i = 5, #KEYS do
  local enough = tonumber(ARGV[i - 2])
  local ok, settled = {}, {}
  for j = 1, #raw do
    if enough > 0 and #settled >= enough then break end
    local s = info(j)
    if s > 0 and redis.call('SISMEMBER', KEYS[i], raw[j]) == 0 then
      ok[#ok + 1] = raw[j]
      if s == 2 then settled[#settled + 1] = raw[j] end
    end
  end
  out[#out + 1] = ok
  out[#out + 1] = settled
end
return out
