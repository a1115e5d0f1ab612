-- decline_done.lua (DECLINE_DONE): a decline's SQL row is written; hand it to the applier.
-- Race closed: a decline handed over twice (its retry, or the beat's recovery of one whose
-- process died, racing the first attempt): only the caller that removes its note from
-- declining pushes it to declines.
-- keys: declining declines
-- argv: assignment_id entry ("task:worker")
-- returns 1 if this call pushed it, else 0
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0
