-- open_leases.lua: included (--#include) by reserve.lua, pop_inbox.lua and open_list.lua.
-- (shared) the worker's open assignments — issued leases, live, not being submitted —
-- oldest first, as {aid, task, expires, row}; drops from open:{w} those that
-- ended (submitted, declined, expired, or gone with a rebuild)
local function open_leases(okey, prefix, worker, now)
  local live = {}
  for _, aid in ipairs(redis.call('ZRANGE', okey, 0, -1)) do
    local l = redis.call('HMGET', prefix .. 'lease:' .. aid, 'task', 'worker', 'expires',
                         'submitting', 'row', 'held')
    if not l[1] or l[2] ~= worker or l[6] or tonumber(l[3]) <= now then
      redis.call('ZREM', okey, aid)
    elseif not l[4] then
      live[#live + 1] = {aid, l[1], l[3], l[5]}
    end
  end
  return live
end

-- records aid in open:{w} as the newest of the worker's open assignments. The score is the
-- issue order (one past the newest there), not the expiry: two assignments issued in the
-- same millisecond would tie on their expiry, and ZRANGE would order them by id
local function open_add(okey, aid)
  local top = redis.call('ZRANGE', okey, -1, -1, 'WITHSCORES')
  local n = 1
  if top[2] then n = tonumber(top[2]) + 1 end
  redis.call('ZADD', okey, n, aid)
end
