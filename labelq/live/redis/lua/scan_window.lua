-- scan_window.lua: included (--#include) by candidates.lua. CANDIDATES' scan of one window
-- with a few bulk reads per chunk of tasks (SMISMEMBER of the worker's seen set, HMGET of
-- the three counters) instead of four calls per task: the same answer, a fraction of the
-- time the script holds the server (a worker who declined the top of pending has deep
-- windows to scan). Appends to ok / settled as chunk_status classifies each task, in
-- order; returns #raw, or -1 when it stopped early with ``enough`` settled ones.
--#include chunk_status.lua
local SCAN_CHUNK = 128
local function scan_window(raw, cap, enough, seen, nlabels, reserved, applied, ok, settled)
  local n = #raw
  local i = 1
  while i <= n do
    if enough > 0 and #settled >= enough then return -1 end
    local j = math.min(n, i + SCAN_CHUNK - 1)
    local is_seen = redis.call('SMISMEMBER', seen, unpack(raw, i, j))
    local ids = {}
    for x = i, j do
      if is_seen[x - i + 1] == 0 then ids[#ids + 1] = raw[x] end
    end
    if #ids > 0 then
      local status = chunk_status(ids, cap, nlabels, reserved, applied)
      local u = 0
      for x = i, j do
        if enough > 0 and #settled >= enough then return -1 end
        if is_seen[x - i + 1] == 0 then
          u = u + 1
          if status[u] > 0 then
            ok[#ok + 1] = raw[x]
            if status[u] == 2 then settled[#settled + 1] = raw[x] end
          end
        end
      end
    end
    i = j + 1
  end
  return n
end
