-- task_status.lua: included (--#include) by candidates.lua and candidates_many.lua.
-- (shared) 0: the task is at the cap; 1: below it; 2: below it with nothing outstanding
-- (no live reservation, every label applied)
local function task_status(t, cap, nlabels, reserved, applied)
  local done = tonumber(redis.call('HGET', nlabels, t) or '0')
  local live = tonumber(redis.call('HGET', reserved, t) or '0')
  if cap >= 0 and done + live >= cap then return 0 end
  if done + live - tonumber(redis.call('HGET', applied, t) or '0') <= 0 then return 2 end
  return 1
end
