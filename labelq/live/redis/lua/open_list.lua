-- open_list.lua (OPEN_LIST): the worker's open assignments, read for `assignments/current`.
-- Race closed: deciding in Python what counts as open (a lease read half-way through a
-- submit, a release or an expiry); the rule is open_leases.lua's, the one RESERVE and
-- POP_INBOX apply: issued to this worker, not expired, not being submitted.
-- keys: open:{w}
-- argv: worker now_ms key_prefix
-- returns a flat list {aid, task, expires_ms, ...}, oldest first (ended ones dropped from
-- open:{w}, as open_leases does)
--#include open_leases.lua
local out = {}
for _, l in ipairs(open_leases(KEYS[1], ARGV[3], ARGV[1], tonumber(ARGV[2]))) do
  out[#out + 1] = l[1]
  out[#out + 1] = l[2]
  out[#out + 1] = l[3]
end
return out
