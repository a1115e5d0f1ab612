-- applied_set.lua (APPLIED_SET): the applier's absolute write of applied counts from SQL
-- (tasks of replayed labels), while a lazy rebuild's stream may still hold back a task's
-- count (labelq.live.backfill): for a task whose plan position is not streamed yet the
-- field gets the count less the rebuild's (its chunk adds that), else the count.
-- Race closed: a chunk streamed between reading the position and the write (both here,
-- and BACKFILL is one script too), which would count the rebuild's labels twice.
-- keys: meta applied warm_ix warm_base
-- argv: task count [task count ...]
-- returns the number of tasks whose count was held back
local pos = tonumber(redis.call('HGET', KEYS[1], 'warm_pos') or '')
local held = 0
for i = 1, #ARGV, 2 do
  local task, n, later = ARGV[i], tonumber(ARGV[i + 1]), false
  if pos then
    local t = tonumber(task)
    local raw = redis.call('GETRANGE', KEYS[3], t * 4, t * 4 + 3)
    local at = #raw == 4 and struct.unpack('<i4', raw) or -1
    if at >= pos then  -- not streamed yet: its record in warm_base, if any (by position)
      later = true
      local lo, hi = 0, redis.call('STRLEN', KEYS[4]) / 20 - 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local p = struct.unpack('<i4', redis.call('GETRANGE', KEYS[4], mid * 20, mid * 20 + 3))
        if p < at then lo = mid + 1 else hi = mid end
      end
      local b = redis.call('GETRANGE', KEYS[4], lo * 20, lo * 20 + 19)
      if #b == 20 then
        local p, _, _, ap = struct.unpack('<i4<i4<i4<i4', b)
        if p == at then
          n = n - ap
          held = held + 1
        end
      end
    end
  end
  if later and n <= 0 then
    redis.call('HDEL', KEYS[2], task)
  else
    redis.call('HSET', KEYS[2], task, n)
  end
end
return held
