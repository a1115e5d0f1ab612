-- packed.lua: included (--#include) by bulk.lua and backfill.lua. Writes many members
-- given as one binary string (numpy's bytes: no per-member argument for the client to
-- pack, ~3 s of redis-py's time per 1M-member ZADD) in calls of PACKED_CALL arguments
-- (Lua's unpack() takes a few thousand at most).
-- ops and their records (little-endian): ZADD / ZADDNX: float64 score, int64 member;
-- HSET: int64 field, int64 value; SADD: int64 member. Members and fields are written as
-- decimal integers (string.format('%d'), as redis-py writes Python ints); scores as Lua
-- numbers, which Redis turns into text losslessly (the same double ZSCORE gives back).
-- Returns the number of records.
local PACKED_CALL = 4000
local function write_packed(key, op, blob)
  local size, fmt, cmd, head = 16, '<d<i8', 'ZADD', nil
  if op == 'ZADDNX' then head = 'NX'
  elseif op == 'HSET' then fmt, cmd = '<i8<i8', 'HSET'
  elseif op == 'SADD' then size, fmt, cmd = 8, '<i8', 'SADD'
  elseif op ~= 'ZADD' then return redis.error_reply('packed: unknown op ' .. op) end
  local n = #blob / size
  local args, pos = {}, 1
  if head then args[1] = head end
  local base = #args
  for _ = 1, n do
    if size == 8 then
      local m
      m, pos = struct.unpack(fmt, blob, pos)
      args[#args + 1] = string.format('%d', m)
    else
      local a, b
      a, b, pos = struct.unpack(fmt, blob, pos)
      if cmd == 'ZADD' then
        args[#args + 1] = a
        args[#args + 1] = string.format('%d', b)
      else
        args[#args + 1] = string.format('%d', a)
        args[#args + 1] = string.format('%d', b)
      end
    end
    if #args - base >= PACKED_CALL then
      redis.call(cmd, key, unpack(args))
      for i = #args, base + 1, -1 do args[i] = nil end
    end
  end
  if #args > base then redis.call(cmd, key, unpack(args)) end
  return n
end
