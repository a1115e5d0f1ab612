-- backfill.lua (BACKFILL): one chunk of the tasks a lazy rebuild left out of pending
-- (labelq.live.backfill), added with ZADD NX at the priorities its caller computed, and the
-- stream's position moved on; the last chunk ends the warming (the plan's key and the
-- meta fields go).
-- Race closed: two processes streaming the same chunk (the position is compared and moved
-- in one step: the second finds it moved and writes nothing), and a stream of an older
-- rebuild writing into a newer one's pending (the epoch is compared).
-- keys: meta pending warm
-- argv: epoch position (records into the plan) next_position records (packed.lua ZADDNX)
--       now_ms
-- returns the number of records written, or -1 (the epoch or the position moved: not ours)
--#include packed.lua
local got = redis.call('HMGET', KEYS[1], 'epoch', 'warm_pos', 'warming')
if got[1] ~= ARGV[1] or got[2] ~= ARGV[2] or not got[3] then return -1 end
local n = write_packed(KEYS[2], 'ZADDNX', ARGV[4])
if tonumber(ARGV[3]) >= tonumber(got[3]) then
  redis.call('DEL', KEYS[3])
  redis.call('HDEL', KEYS[1], 'warming', 'warm_pos', 'warm_at')
else
  redis.call('HSET', KEYS[1], 'warm_pos', ARGV[3], 'warm_at', ARGV[5])
end
return n
