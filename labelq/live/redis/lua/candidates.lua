-- candidates.lua (CANDIDATES): read-only; the top of pending (or given gold tasks) less
-- those the worker has seen and those at the cap, and which of them are settled.
-- Race closed: none needed (read-only, one round trip); RESERVE re-checks whatever is
-- chosen from it.
-- keys: pending seen:{w} nlabels reserved applied
-- argv: cap offset count enough [task ...] (with tasks: those, cap not applied — gold)
-- returns {eligible, settled (eligible with nothing outstanding), number looked at}; stops
-- early once ``enough`` settled candidates are found (0 = look at all)
--#include task_status.lua
local cap = tonumber(ARGV[1])
local enough = tonumber(ARGV[4])
local raw
if #ARGV > 4 then
  raw = {}
  for i = 5, #ARGV do raw[#raw + 1] = ARGV[i] end
else
  raw = redis.call('ZREVRANGE', KEYS[1], ARGV[2], tonumber(ARGV[2]) + tonumber(ARGV[3]) - 1)
end
local ok, settled = {}, {}
local looked = 0
for _, t in ipairs(raw) do
  if enough > 0 and #settled >= enough then break end
  looked = looked + 1
  if redis.call('SISMEMBER', KEYS[2], t) == 0 then
    local s = task_status(t, cap, KEYS[3], KEYS[4], KEYS[5])
    if s > 0 then ok[#ok + 1] = t end
    if s == 2 then settled[#settled + 1] = t end
  end
end
if looked < #raw then return {ok, settled, -1} end
return {ok, settled, #raw}
