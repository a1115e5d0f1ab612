-- backfill.lua (BACKFILL): one chunk of the tasks a lazy rebuild left out of pending
-- (labelq.live.backfill): their nlabels, applied and seen entries the rebuild held back
-- are added (HINCRBY, or HSET where the field is absent, and SADD of the rebuild's counts,
-- read here from warm_base and warm_seen: whatever live writers added meanwhile stays), then the tasks go into pending
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
-- 1. the counts held back: warm_base's records (position, task, nlabels, applied, first
-- of its workers in warm_seen; int32), only for positions with something held, sorted by
-- position, the last one a sentinel (the plan's size, the end of warm_seen); none for a
-- plan written without them. Binary search for the first record at or after ``first``.
local nrec = redis.call('STRLEN', KEYS[4]) / 20
if nrec > 0 then
  local lo, hi = 0, nrec - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local p = struct.unpack('<i4', redis.call('GETRANGE', KEYS[4], mid * 20, mid * 20 + 3))
    if p < first then lo = mid + 1 else hi = mid end
  end
  -- at most last - first records are in the chunk, and the one after it is there too
  local raw = redis.call('GETRANGE', KEYS[4], lo * 20, (lo + last - first + 1) * 20 - 1)
  local k = 0
  while struct.unpack('<i4', raw, k * 20 + 1) < last do k = k + 1 end
  if k > 0 then
    local _, _, _, _, from = struct.unpack('<i4<i4<i4<i4<i4', raw, 1)
    local _, _, _, _, upto = struct.unpack('<i4<i4<i4<i4<i4', raw, k * 20 + 1)
    local seen = upto > from and redis.call('GETRANGE', KEYS[5], from * 4, upto * 4 - 1) or ''
    local add = {[KEYS[7]] = {{}, {}}, [KEYS[8]] = {{}, {}}}  -- tasks, counts
    local by_worker = {}
    for i = 0, k - 1 do
      local _, t, nl, ap, a = struct.unpack('<i4<i4<i4<i4<i4', raw, i * 20 + 1)
      local _, _, _, _, b = struct.unpack('<i4<i4<i4<i4<i4', raw, i * 20 + 21)
      local task = string.format('%d', t)
      for key, c in pairs({[KEYS[7]] = nl, [KEYS[8]] = ap}) do
        if c > 0 then
          local l = add[key]
          l[1][#l[1] + 1], l[2][#l[2] + 1] = task, c
        end
      end
      for j = a, b - 1 do
        local w = struct.unpack('<i4', seen, (j - from) * 4 + 1)
        local l = by_worker[w]
        if not l then l = {}; by_worker[w] = l end
        l[#l + 1] = task
      end
    end
    -- a field nobody wrote since the rebuild is set (one HSET a batch), one a live writer
    -- created is incremented: the same sums as an HINCRBY each
    for key, l in pairs(add) do
      for i = 1, #l[1], 1000 do
        local j = math.min(i + 999, #l[1])
        local had = redis.call('HMGET', key, unpack(l[1], i, j))
        local set = {}
        for x = i, j do
          if had[x - i + 1] then
            redis.call('HINCRBY', key, l[1][x], l[2][x])
          else
            set[#set + 1], set[#set + 2] = l[1][x], l[2][x]
          end
        end
        if #set > 0 then redis.call('HSET', key, unpack(set)) end
      end
    end
    for w, l in pairs(by_worker) do
      local key = ARGV[6] .. 'seen:' .. string.format('%d', w)
      for i = 1, #l, 4000 do redis.call('SADD', key, unpack(l, i, math.min(i + 3999, #l))) end
    end
  end
end
-- 2. the tasks, read in batches (one SMISMEMBER / HMGET per batch, not a call per task)
local cap = tonumber(got[4] or '') or -1
local any_settled = redis.call('SCARD', KEYS[11]) > 0
local blob = ARGV[4]
local n = #blob / 16
local BATCH = 1000
for i = 0, n - 1, BATCH do
  local m = math.min(BATCH, n - i)
  local tasks, scores = {}, {}
  for j = 1, m do
    local score, t = struct.unpack('<d<i8', blob, (i + j - 1) * 16 + 1)
    scores[j], tasks[j] = score, string.format('%d', t)
  end
  local gold = redis.call('SMISMEMBER', KEYS[12], unpack(tasks))
  local settled = any_settled and redis.call('SMISMEMBER', KEYS[11], unpack(tasks))
  local done, live
  if cap >= 0 then
    done = redis.call('HMGET', KEYS[7], unpack(tasks))
    live = redis.call('HMGET', KEYS[9], unpack(tasks))
  end
  local pend, park = {'NX'}, {'NX'}
  for j = 1, m do
    local to = pend
    if gold[j] == 1 or (settled and settled[j] == 1) then
      to = nil
    elseif cap >= 0 then
      local d = tonumber(done[j] or '0')
      local h = tonumber(live[j] or '0')
      if d >= cap then to = nil elseif d + h >= cap then to = park end
    end
    if to then
      to[#to + 1] = scores[j]
      to[#to + 1] = tasks[j]
    end
  end
  if #pend > 1 then redis.call('ZADD', KEYS[2], unpack(pend)) end
  if #park > 1 then redis.call('ZADD', KEYS[10], unpack(park)) end
end
if last >= tonumber(got[3]) then
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  redis.call('HDEL', KEYS[1], 'warming', 'warm_pos', 'warm_at')
else
  redis.call('HSET', KEYS[1], 'warm_pos', ARGV[3], 'warm_at', ARGV[5])
end
return last - first
