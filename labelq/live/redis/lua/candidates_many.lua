-- candidates_many.lua (CANDIDATES_MANY): CANDIDATES for many workers in one call (the
-- applier's batched refill).
-- Race closed: none needed (read-only); RESERVE re-checks every choice.
-- keys: pending nlabels reserved applied seen:{w1} ... seen:{wn}
-- argv: cap count enough_1 ... enough_n
-- CANDIDATES for n workers at once over the top ``count`` of pending: a task's cap and
-- settled checks are made once (on first need) whatever the number of workers, the seen
-- check per worker; each worker's scan stops once it has ``enough_i`` settled candidates
-- (0 = look at all). Returns {eligible_1, settled_1, ..., eligible_n, settled_n}.
-- Reads in bulk, a chunk of tasks at a time (HMGET of the three counters, SMISMEMBER of a
-- worker's seen set), as CANDIDATES does (scan_window.lua).
--#include chunk_status.lua
local CHUNK = 128
local cap = tonumber(ARGV[1])
local raw = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = #raw
local state = {}  -- index -> 0 (at the cap), 1 (eligible), 2 (eligible and settled)
local filled = 0
local function fill(upto)  -- the state of tasks 1..upto (a chunk at a time)
  while filled < upto do
    local a, b = filled + 1, math.min(n, filled + CHUNK)
    local status = chunk_status({unpack(raw, a, b)}, cap, KEYS[2], KEYS[3], KEYS[4])
    for x = a, b do state[x] = status[x - a + 1] end
    filled = b
  end
end
local out = {}
for i = 5, #KEYS do
  local enough = tonumber(ARGV[i - 2])
  local ok, settled = {}, {}
  local a = 1
  while a <= n and not (enough > 0 and #settled >= enough) do
    local b = math.min(n, a + CHUNK - 1)
    fill(b)
    local seen = redis.call('SMISMEMBER', KEYS[i], unpack(raw, a, b))
    for x = a, b do
      if enough > 0 and #settled >= enough then break end
      if state[x] > 0 and seen[x - a + 1] == 0 then
        ok[#ok + 1] = raw[x]
        if state[x] == 2 then settled[#settled + 1] = raw[x] end
      end
    end
    a = b + 1
  end
  out[#out + 1] = ok
  out[#out + 1] = settled
end
return out
