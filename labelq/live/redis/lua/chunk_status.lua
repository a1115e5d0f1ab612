-- chunk_status.lua: included (--#include) by scan_window.lua and candidates_many.lua. The
-- status of tasks ``ids`` in bulk (one HMGET of each counter): 0 at the cap (labels plus
-- live reservations reach ``cap``, when cap >= 0), 2 eligible and settled (every label
-- held is applied), 1 eligible.
local function chunk_status(ids, cap, nlabels, reserved, applied)
  local done = redis.call('HMGET', nlabels, unpack(ids))
  local live = redis.call('HMGET', reserved, unpack(ids))
  local app = redis.call('HMGET', applied, unpack(ids))
  local out = {}
  for k = 1, #ids do
    local held = tonumber(done[k] or '0') + tonumber(live[k] or '0')
    if cap >= 0 and held >= cap then out[k] = 0
    elseif held - tonumber(app[k] or '0') <= 0 then out[k] = 2
    else out[k] = 1 end
  end
  return out
end
