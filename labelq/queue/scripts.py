"""Lua scripts: every check-then-act on the hot state runs as one script, so it is atomic.

Each script opens with a comment listing every key it touches. The races they close:

* ``RESERVE`` — two requests that both *check* "task below the cap / worker below capacity /
  budget left" and then both *act* would over-issue. The checks and the increments of
  ``reserved``, ``wcount``, ``reserved_cost``, ``seen`` and the lease happen in one script.
* ``SUBMIT_BEGIN`` — validates the lease (exists, this worker's, not expired) and marks it
  ``submitting`` so the reaper leaves it alone while the label is written to SQL.
* ``SUBMIT_FINISH`` — moves the reservation to "done" exactly once: the lease hash is the
  token; whoever deletes it moves the counters, a second call finds nothing and does nothing.
* ``RELEASE`` — expiry (reaper) and decline return a task to the pool exactly once, and never
  a lease that is mid-submission unless the caller has checked SQL for its label.
"""

from __future__ import annotations

from dataclasses import dataclass

from .keys import Keys

__all__ = ["load_script", "RESERVE", "SUBMIT_BEGIN", "SUBMIT_FINISH", "RELEASE", "Scripts", "ReserveResult"]

RESERVE = """
-- keys: seen:{w} gold nlabels reserved wcount spent reserved_cost lease:{a} leases pending
--       parked nissued
-- argv: task worker cap capacity cost budget assignment_id expires_ms key_ttl_ms task_id
--       category (index of the task's category, counted per worker for gold)
local task, worker = ARGV[1], ARGV[2]
local cap, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
if redis.call('SISMEMBER', KEYS[1], task) == 1 then return {0, 'seen'} end
local gold = redis.call('SISMEMBER', KEYS[2], task)
local done = tonumber(redis.call('HGET', KEYS[3], task) or '0')
local live = tonumber(redis.call('HGET', KEYS[4], task) or '0')
if gold == 0 and cap >= 0 and done + live >= cap then return {0, 'cap'} end
if capacity >= 0 and tonumber(redis.call('HGET', KEYS[5], worker) or '0') >= capacity then
  return {0, 'capacity'}
end
if budget >= 0 then
  local spent = tonumber(redis.call('GET', KEYS[6]) or '0')
  local held = tonumber(redis.call('GET', KEYS[7]) or '0')
  if spent + held + cost > budget + 1e-9 then return {0, 'budget'} end
end
redis.call('SADD', KEYS[1], task)
redis.call('HINCRBY', KEYS[4], task, 1)
redis.call('HINCRBY', KEYS[5], worker, 1)
redis.call('HINCRBY', KEYS[12], worker, 1)
if gold == 1 then
  redis.call('HINCRBY', KEYS[12], 'g' .. worker, 1)
  if ARGV[11] and ARGV[11] ~= '' then
    redis.call('HINCRBY', KEYS[12], 'g' .. worker .. ':' .. ARGV[11], 1)
  end
end
redis.call('INCRBYFLOAT', KEYS[7], ARGV[5])
redis.call('HSET', KEYS[8], 'task', task, 'worker', worker, 'gold', gold, 'cost', ARGV[5],
           'expires', ARGV[8], 'tid', ARGV[10])
redis.call('PEXPIRE', KEYS[8], ARGV[9])
redis.call('ZADD', KEYS[9], ARGV[8], ARGV[7])
if gold == 0 and cap >= 0 and done + live + 1 >= cap then
  local s = redis.call('ZSCORE', KEYS[10], task)
  if s then
    redis.call('ZREM', KEYS[10], task)
    redis.call('ZADD', KEYS[11], s, task)
  end
end
return {1, 'ok'}
"""

SUBMIT_BEGIN = """
-- keys: lease:{a}
-- argv: worker now_ms
local lease = redis.call('HMGET', KEYS[1], 'task', 'worker', 'gold', 'cost', 'expires', 'tid')
if not lease[1] then return {'missing'} end
if lease[2] ~= ARGV[1] then return {'forbidden'} end
if tonumber(lease[5]) < tonumber(ARGV[2]) then return {'expired'} end
redis.call('HSET', KEYS[1], 'submitting', ARGV[2])
return {'ok', lease[1], lease[3], lease[4], lease[6] or ''}
"""

SUBMIT_FINISH = """
-- keys: lease:{a} leases nlabels reserved spent reserved_cost pending parked
-- argv: assignment_id cap
local lease = redis.call('HMGET', KEYS[1], 'task', 'gold', 'cost')
if not lease[1] then return 0 end
local task = lease[1]
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local done = redis.call('HINCRBY', KEYS[3], task, 1)
redis.call('HINCRBY', KEYS[4], task, -1)
redis.call('INCRBYFLOAT', KEYS[5], lease[3])
redis.call('INCRBYFLOAT', KEYS[6], -tonumber(lease[3]))
local cap = tonumber(ARGV[2])
if lease[2] == '0' and cap >= 0 and done >= cap then
  redis.call('ZREM', KEYS[7], task)
  redis.call('ZREM', KEYS[8], task)
end
return 1
"""

RELEASE = """
-- keys: lease:{a} leases reserved wcount reserved_cost pending parked
-- argv: assignment_id worker('' = any) expired_before_ms('' = no check) allow_submitting
local lease = redis.call('HMGET', KEYS[1], 'task', 'worker', 'cost', 'expires', 'submitting')
if not lease[1] then return {0, 'missing'} end
if ARGV[2] ~= '' and lease[2] ~= ARGV[2] then return {0, 'forbidden'} end
if lease[5] and ARGV[4] ~= '1' then return {0, 'submitting'} end
if ARGV[3] ~= '' and tonumber(lease[4]) >= tonumber(ARGV[3]) then return {0, 'live'} end
local task = lease[1]
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], task, -1)
redis.call('HINCRBY', KEYS[4], lease[2], -1)
redis.call('INCRBYFLOAT', KEYS[5], -tonumber(lease[3]))
local s = redis.call('ZSCORE', KEYS[7], task)
if s then
  redis.call('ZREM', KEYS[7], task)
  redis.call('ZADD', KEYS[6], s, task)
end
return {1, task, lease[2]}
"""


def load_script(redis, source: str):
    """``register_script`` plus a ``SCRIPT LOAD`` now, so the first EVALSHA never meets
    NOSCRIPT: redis-py recovers from that on a real server, but the embedded server of
    ``labelq demo`` (fakeredis over TCP) answers it by closing the connection."""
    script = redis.register_script(source)
    redis.script_load(source)
    return script


@dataclass(frozen=True)
class ReserveResult:
    ok: bool
    reason: str


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Scripts:
    """The scripts registered on one Redis client (EVALSHA with a reload on NOSCRIPT)."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self._reserve = load_script(redis, RESERVE)
        self._begin = load_script(redis, SUBMIT_BEGIN)
        self._finish = load_script(redis, SUBMIT_FINISH)
        self._release = load_script(redis, RELEASE)

    def reserve(self, k: Keys, *, task: int, worker: int, cap: int | None,
                capacity: int | None, cost: float, budget: float | None,
                assignment_id: str, expires_ms: int, key_ttl_ms: int,
                task_id: int | None = None, category: int | None = None,
                pipeline=None) -> ReserveResult:
        keys = [k.seen(worker), k.gold, k.nlabels, k.reserved, k.wcount, k.spent,
                k.reserved_cost, k.lease(assignment_id), k.leases, k.pending, k.parked,
                k.nissued]
        args = [task, worker, -1 if cap is None else cap,
                -1 if capacity is None else capacity, repr(float(cost)),
                -1 if budget is None else repr(float(budget)), assignment_id, expires_ms,
                key_ttl_ms, "" if task_id is None else int(task_id),
                "" if category is None else int(category)]
        out = self._reserve(keys=keys, args=args, client=pipeline or self.redis)
        return ReserveResult(bool(int(out[0])), _s(out[1]))

    def submit_begin(self, k: Keys, assignment_id: str, worker: int, now_ms: int):
        """('ok', task, gold, cost, task_id or None) or (reason,) with reason
        missing/forbidden/expired."""
        out = self._begin(keys=[k.lease(assignment_id)], args=[worker, now_ms])
        if _s(out[0]) != "ok":
            return (_s(out[0]),)
        tid = _s(out[4]) if len(out) > 4 else ""
        return ("ok", int(out[1]), _s(out[2]) == "1", float(out[3]), int(tid) if tid else None)

    def submit_finish(self, k: Keys, assignment_id: str, cap: int | None,
                      pipeline=None) -> bool:
        keys = [k.lease(assignment_id), k.leases, k.nlabels, k.reserved, k.spent,
                k.reserved_cost, k.pending, k.parked]
        out = self._finish(keys=keys, args=[assignment_id, -1 if cap is None else cap],
                           client=pipeline or self.redis)
        return bool(int(out))

    def release(self, k: Keys, assignment_id: str, *, worker: int | None = None,
                expired_before_ms: int | None = None, allow_submitting: bool = False,
                pipeline=None):
        """(True, task, worker) when released, else (False, reason)."""
        keys = [k.lease(assignment_id), k.leases, k.reserved, k.wcount, k.reserved_cost,
                k.pending, k.parked]
        args = [assignment_id, "" if worker is None else worker,
                "" if expired_before_ms is None else expired_before_ms,
                "1" if allow_submitting else "0"]
        out = self._release(keys=keys, args=args, client=pipeline or self.redis)
        if int(out[0]) == 1:
            return (True, int(out[1]), int(out[2]))
        return (False, _s(out[1]))
