-- candidates_scan.lua (CANDIDATES_SCAN): read-only; CANDIDATES over successive windows of
-- pending, as a decision made at once walks them (labelq/live/decide.py), in one call
-- instead of a round trip per window and one for the jump: it stops at the first window
-- with settled candidates (the caller tries those and, if none can be had, calls again
-- from the resume point it got) or where the walk ends.
-- Race closed: none needed (read-only); RESERVE re-checks whatever is chosen from it.
-- keys: pending seen:{w} nlabels reserved applied leases
-- argv: cap offset size enough max_scan settled_scan jumped scanned has_fallback
--   the walk: windows from ``offset`` of ``size`` tasks, each 4 times the one before;
--   once a window had eligible tasks (the fallback), the next one starts no nearer than
--   the number of leases (past the outstanding tasks), and the walk ends ``settled_scan``
--   tasks beyond the first window, at a window that came up short, or at ``max_scan``
-- returns {settled, fallback, {done, offset, size, jumped, scanned}}: the settled tasks of
-- the window it stopped at ({} if none), the eligible tasks of the first window that had
-- any when the caller had no fallback yet ({} otherwise), and where to go on (done: 1
-- when the walk is over, whatever the settled tasks give)
--#include scan_window.lua
local cap = tonumber(ARGV[1])
local offset, size = tonumber(ARGV[2]), tonumber(ARGV[3])
local enough, max_scan = tonumber(ARGV[4]), tonumber(ARGV[5])
local settled_scan = tonumber(ARGV[6])
local jumped, scanned = tonumber(ARGV[7]), tonumber(ARGV[8])
local has_fallback = ARGV[9] == '1'
local fallback = {}
while offset < max_scan do
  local raw = redis.call('ZREVRANGE', KEYS[1], offset, offset + size - 1)
  local ok, settled = {}, {}
  local n = scan_window(raw, cap, enough, KEYS[2], KEYS[3], KEYS[4], KEYS[5], ok, settled)
  if n == 0 then break end
  if #ok > 0 and not has_fallback then
    fallback = ok
    has_fallback = true
  end
  -- where the walk goes on if none of this window's settled tasks can be had
  local done = 0
  if n >= 0 and n < size then
    done = 1
  else
    if offset > 0 then scanned = scanned + size end
    if has_fallback and scanned >= settled_scan then
      done = 1
    else
      local next_offset = offset + size
      if has_fallback and jumped == 0 then
        jumped = 1
        next_offset = math.max(next_offset, redis.call('ZCARD', KEYS[6]))
      end
      offset, size = next_offset, size * 4
      if offset >= max_scan then done = 1 end
    end
  end
  if #settled > 0 or done == 1 then
    return {settled, fallback, {done, offset, size, jumped, scanned}}
  end
end
return {{}, fallback, {1, offset, size, jumped, scanned}}
