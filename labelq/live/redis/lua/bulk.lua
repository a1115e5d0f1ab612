-- bulk.lua (BULK): one packed write (packed.lua) of many members into one key.
-- Race closed: none (a plain write; its caller, a rebuild, holds the apply lock).
-- keys: the key
-- argv: op (ZADD, ZADDNX, HSET, SADD) records
-- returns the number of records
--#include packed.lua
return write_packed(KEYS[1], ARGV[1], ARGV[2])
