-- backfill.lua (BACKFILL): one chunk of the tasks a lazy rebuild left out of pending
-- (labelq.live.backfill): their nlabels, applied and seen entries the rebuild held back
-- are added (HINCRBY / SADD of the rebuild's counts, read here from warm_base and
-- warm_seen: whatever live writers added meanwhile stays), then the tasks go into pending
-- (ZADD NX) at the priorities its caller computed, unless they are gold (marked since),
-- settled by a model alone, or at the cap meta names now (parked when only live leases
-- hold them there, as RESERVE would have put them); the stream's position moves on and the
-- last chunk ends the warming (the plan's keys and the meta fields go).
-- Race closed: two processes streaming the same chunk (the position is compared and moved
-- in one step: the second finds it moved and writes nothing, so a count is added once), a
-- stream of an older rebuild writing into a newer one's state (the epoch is compared), and
-- a label or lease counted between a check and the ZADD (the counters are read here).
-- keys: meta pending warm warm_base warm_seen warm_ix nlabels applied reserved parked
--       settled gold
-- argv: epoch position (records into the plan) next_position records (ZADDNX: float64
--       score, int64 task) now_ms key_prefix (for seen:{w})
-- returns the number of plan positions streamed (next_position - position), or -1 (the
-- epoch or the position moved: not ours)
local got = redis.call('HMGET', KEYS[1], 'epoch', 'warm_pos', 'warming', 'cap')
if got[1] ~= ARGV[1] or got[2] ~= ARGV[2] or not got[3] then return -1 end
local first, last = tonumber(ARGV[2]), tonumber(ARGV[3])
-- the counts held back: records first .. last (one more: where the next one's workers
-- start); none for a plan written without them
local base = redis.call('GETRANGE', KEYS[4], first * 12, (last + 1) * 12 - 1)
if #base == (last - first + 1) * 12 then
  local seqs = redis.call('GETRANGE', KEYS[3], first * 8, last * 8 - 1)
  local _, _, from = struct.unpack('<i4<i4<i4', base, 1)
  local _, _, upto = struct.unpack('<i4<i4<i4', base, (last - first) * 12 + 1)
  local seen = upto > from and redis.call('GETRANGE', KEYS[5], from * 4, upto * 4 - 1) or ''
  for i = 0, last - first - 1 do
    local task = string.format('%d', (struct.unpack('<i8', seqs, i * 8 + 1)))
    local nl, ap, a = struct.unpack('<i4<i4<i4', base, i * 12 + 1)
    local _, _, b = struct.unpack('<i4<i4<i4', base, i * 12 + 13)
    if nl > 0 then redis.call('HINCRBY', KEYS[7], task, nl) end
    if ap > 0 then redis.call('HINCRBY', KEYS[8], task, ap) end
    for j = a, b - 1 do
      local w = struct.unpack('<i4', seen, (j - from) * 4 + 1)
      redis.call('SADD', ARGV[6] .. 'seen:' .. string.format('%d', w), task)
    end
  end
end
local cap = tonumber(got[4] or '') or -1
local any_settled = redis.call('SCARD', KEYS[11]) > 0
local blob, n = ARGV[4], #ARGV[4] / 16
local pend, park = {'NX'}, {'NX'}
for i = 0, n - 1 do
  local score, m = struct.unpack('<d<i8', blob, i * 16 + 1)
  local task = string.format('%d', m)
  local to = pend
  if redis.call('SISMEMBER', KEYS[12], task) == 1 or
      (any_settled and redis.call('SISMEMBER', KEYS[11], task) == 1) then
    to = nil
  elseif cap >= 0 then
    local done = tonumber(redis.call('HGET', KEYS[7], task) or '0')
    local live = tonumber(redis.call('HGET', KEYS[9], task) or '0')
    if done >= cap then to = nil elseif done + live >= cap then to = park end
  end
  if to then
    to[#to + 1] = score
    to[#to + 1] = task
    if #to >= 4000 then
      redis.call('ZADD', to == pend and KEYS[2] or KEYS[10], unpack(to))
      for j = #to, 2, -1 do to[j] = nil end
    end
  end
end
if #pend > 1 then redis.call('ZADD', KEYS[2], unpack(pend)) end
if #park > 1 then redis.call('ZADD', KEYS[10], unpack(park)) end
if last >= tonumber(got[3]) then
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  redis.call('HDEL', KEYS[1], 'warming', 'warm_pos', 'warm_at')
else
  redis.call('HSET', KEYS[1], 'warm_pos', ARGV[3], 'warm_at', ARGV[5])
end
return last - first
