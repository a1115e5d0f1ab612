-- candidates.lua (CANDIDATES): read-only; the top of pending (or given gold tasks) less
-- those the worker has seen and those at the cap, and which of them are settled.
-- Race closed: none needed (read-only, one round trip); RESERVE re-checks whatever is
-- chosen from it.
-- keys: pending seen:{w} nlabels reserved applied
-- argv: cap offset count enough [task ...] (with tasks: those, cap not applied — gold)
-- returns {eligible, settled (eligible with nothing outstanding), number looked at}; stops
-- early once ``enough`` settled candidates are found (0 = look at all)
--#include scan_window.lua
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
local looked = scan_window(raw, cap, enough, KEYS[2], KEYS[3], KEYS[4], KEYS[5], ok, settled)
return {ok, settled, looked}
