"""Lua scripts: every check-then-act on the hot state runs as one script, so it is atomic.

Each script opens with a comment listing every key it touches. The races they close:

* ``RESERVE`` — two requests that both *check* "task below the cap / worker below capacity /
  budget left" and then both *act* would over-issue. The checks and the increments of
  ``reserved``, ``wcount``, ``reserved_cost``, ``seen`` and the lease happen in one script.
* ``SUBMIT_BEGIN`` — validates the lease (exists, this worker's, not expired) and marks it
  ``submitting`` so the reaper leaves it alone while the label is written to SQL.
* ``SUBMIT_FINISH`` — moves the reservation to "done" exactly once: the lease hash is the
  token; whoever deletes it moves the counters, a second call finds nothing and does nothing.
* ``CANDIDATES`` — read-only: the top of ``pending`` (or given tasks) less those the worker
  has seen and those at the cap, in one round trip; ``RESERVE`` re-checks whatever is chosen.
* ``POP_INBOX`` — pops the worker's inbox until a live reservation of theirs turns up and
  starts its lease *now* (held reservations have a short hold expiry), in one round trip;
  also records the worker as active and says when the project has no hot state. With a
  bound on open assignments, a worker who holds that many gets the oldest again: two
  ``next`` requests at once cannot both issue past the bound (``RESERVE`` checks it too).
* ``RELEASE`` — expiry (reaper) and decline return a task to the pool exactly once, and never
  a lease that is mid-submission unless the caller has checked SQL for its label; with
  ``held_only`` (a worker with nothing to do reclaiming another's inbox reservation) never
  one its worker has already taken.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import NamedTuple

from redis import Redis
from redis.connection import ConnectionPool
from redis.exceptions import NoScriptError, ResponseError

from .keys import Keys

try:  # packs commands in C (a dependency; redis-py's encoder if it is missing)
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None

__all__ = ["load_script", "RESERVE", "SUBMIT_BEGIN", "SUBMIT_FINISH", "RELEASE", "CANDIDATES",
           "POP_INBOX", "CANDIDATES_MANY", "Scripts", "ScriptPipeline", "ReserveResult",
           "Released"]

# the worker's open assignments, shared by RESERVE and POP_INBOX
_OPEN_LEASES = """-- (shared) the worker's open assignments — issued leases, live, not being submitted —
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
"""

RESERVE = """
-- keys: seen:{w} gold nlabels reserved wcount spent reserved_cost lease:{a} leases pending
--       parked nissued [inbox:{w} [open:{w}]]
-- argv: task worker cap capacity cost budget assignment_id expires_ms key_ttl_ms task_id
--       category (index of the task's category, counted per worker for gold)
--       [row: JSON [external id, category, payload] of the task, kept in the lease so that
--       POP_INBOX can answer without a SQL read]
--       [expected issued, expected gold issued: the worker's counts in nissued that the
--       gold schedule's decision was made on ('' for none); if either moved since, 'stale']
--       [mode: 'hold' (default) or 'empty'] [max open, key prefix, now_ms: mode 'empty']
--       (with the 13th key, the worker's inbox: in mode 'hold' the assignment id is appended
--       to it, a held reservation; in mode 'empty' — a decision made at once because the
--       inbox was empty — the script answers 'inbox' if reservations arrived there since,
--       so that the worker gets them first and in the order they were decided; and, with
--       the 14th key, 'open' if the worker holds max open assignments already — another
--       request of theirs issued one meanwhile —, else the lease is recorded there)
""" + _OPEN_LEASES + """local task, worker = ARGV[1], ARGV[2]
local cap, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local hold = KEYS[13] and ARGV[15] ~= 'empty'
if KEYS[13] and not hold and redis.call('LLEN', KEYS[13]) > 0 then return {0, 'inbox'} end
local bounded = KEYS[14] and not hold
if bounded and #open_leases(KEYS[14], ARGV[17], worker, tonumber(ARGV[18])) >=
    tonumber(ARGV[16]) then
  return {0, 'open'}
end
if ARGV[13] and ARGV[13] ~= '' and
    (tonumber(redis.call('HGET', KEYS[12], worker) or '0') ~= tonumber(ARGV[13]) or
     tonumber(redis.call('HGET', KEYS[12], 'g' .. worker) or '0') ~= tonumber(ARGV[14])) then
  return {0, 'stale'}
end
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
if ARGV[12] and ARGV[12] ~= '' then redis.call('HSET', KEYS[8], 'row', ARGV[12]) end
redis.call('PEXPIRE', KEYS[8], ARGV[9])
redis.call('ZADD', KEYS[9], ARGV[8], ARGV[7])
if hold then
  -- held in the inbox: not issued to the annotator yet; RELEASE takes the count back
  redis.call('HSET', KEYS[8], 'held', 1, 'cat', ARGV[11])
  redis.call('RPUSH', KEYS[13], ARGV[7])
end
if bounded then redis.call('ZADD', KEYS[14], ARGV[8], ARGV[7]) end
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
-- keys: lease:{a} leases nlabels reserved spent reserved_cost pending parked [apply_wanted]
-- argv: assignment_id cap [wanted_ttl_ms]
-- returns 0 (nothing to finish), 1 (finished), 2 (finished and it set apply_wanted: the
-- caller must wake the applier)
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
if KEYS[9] and redis.call('SET', KEYS[9], 1, 'NX', 'PX', ARGV[3]) then return 2 end
return 1
"""

# the cap and "settled" checks of a task, shared by CANDIDATES and CANDIDATES_MANY
_TASK_STATUS = """-- (shared) 0: the task is at the cap; 1: below it; 2: below it with nothing outstanding
-- (no live reservation, every label applied)
local function task_status(t, cap, nlabels, reserved, applied)
  local done = tonumber(redis.call('HGET', nlabels, t) or '0')
  local live = tonumber(redis.call('HGET', reserved, t) or '0')
  if cap >= 0 and done + live >= cap then return 0 end
  if done + live - tonumber(redis.call('HGET', applied, t) or '0') <= 0 then return 2 end
  return 1
end
"""

CANDIDATES = """
-- keys: pending seen:{w} nlabels reserved applied
-- argv: cap offset count enough [task ...] (with tasks: those, cap not applied — gold)
-- returns {eligible, settled (eligible with nothing outstanding), number looked at}; stops
-- early once ``enough`` settled candidates are found (0 = look at all)
""" + _TASK_STATUS + """local cap = tonumber(ARGV[1])
local enough = tonumber(ARGV[4])
local raw
if #ARGV > 4 then
  raw = {}
  for i = 5, #ARGV do raw[#raw + 1] = ARGV[i] end
else
  raw = redis.call('ZREVRANGE', KEYS[1], ARGV[2], tonumber(ARGV[2]) + tonumber(ARGV[3]) - 1)
end
local ok, settled = {}, {}
local looked = 0
for _, t in ipairs(raw) do
  if enough > 0 and #settled >= enough then break end
  looked = looked + 1
  if redis.call('SISMEMBER', KEYS[2], t) == 0 then
    local s = task_status(t, cap, KEYS[3], KEYS[4], KEYS[5])
    if s > 0 then ok[#ok + 1] = t end
    if s == 2 then settled[#settled + 1] = t end
  end
end
if looked < #raw then return {ok, settled, -1} end
return {ok, settled, #raw}
"""

CANDIDATES_MANY = """
-- keys: pending nlabels reserved applied seen:{w1} ... seen:{wn}
-- argv: cap count enough_1 ... enough_n
-- CANDIDATES for n workers at once over the top ``count`` of pending: a task's cap and
-- settled checks are made once (on first need) whatever the number of workers, the seen
-- check per worker; each worker's scan stops once it has ``enough_i`` settled candidates
-- (0 = look at all). Returns {eligible_1, settled_1, ..., eligible_n, settled_n}.
""" + _TASK_STATUS + """local cap = tonumber(ARGV[1])
local raw = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local state = {}  -- index -> 0 (at the cap), 1 (eligible), 2 (eligible and settled)
local function info(j)
  local s = state[j]
  if not s then
    s = task_status(raw[j], cap, KEYS[2], KEYS[3], KEYS[4])
    state[j] = s
  end
  return s
end
local out = {}
for i = 5, #KEYS do
  local enough = tonumber(ARGV[i - 2])
  local ok, settled = {}, {}
  for j = 1, #raw do
    if enough > 0 and #settled >= enough then break end
    local s = info(j)
    if s > 0 and redis.call('SISMEMBER', KEYS[i], raw[j]) == 0 then
      ok[#ok + 1] = raw[j]
      if s == 2 then settled[#settled + 1] = raw[j] end
    end
  end
  out[#out + 1] = ok
  out[#out + 1] = settled
end
return out
"""

POP_INBOX = """
-- keys: inbox:{w} active leases meta requests [open:{w}], and lease:{a} of each popped id
--       (named from argv[5]: all in the project's key space)
-- argv: worker now_ms lease_ms key_ttl_ms key_prefix min_left_ms [max_open]
-- returns {} (inbox empty), {'unbuilt'} (no hot state), or {aid, task, expires_ms[, row]}
-- (row: the task's JSON row when the reservation carries it). With open:{w}: when the
-- worker holds max_open open assignments already, the oldest of them is returned again
-- (a repeated next is idempotent: a reload, a retry), else a popped lease is recorded there
""" + _OPEN_LEASES + """if redis.call('HEXISTS', KEYS[4], 'built') == 0 then return {'unbuilt'} end
local now = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('HINCRBY', KEYS[5], ARGV[1], 1)
if KEYS[6] then
  local live = open_leases(KEYS[6], ARGV[5], ARGV[1], now)
  if #live > 0 and #live >= tonumber(ARGV[7]) then
    local o = live[1]
    if o[4] then return {o[1], o[2], o[3], o[4]} end
    return {o[1], o[2], o[3]}
  end
end
while true do
  local aid = redis.call('LPOP', KEYS[1])
  if not aid then return {} end
  local lk = ARGV[5] .. 'lease:' .. aid
  local l = redis.call('HMGET', lk, 'task', 'worker', 'expires', 'submitting', 'row')
  if l[1] and l[2] == ARGV[1] and not l[4] and tonumber(l[3]) > now + tonumber(ARGV[6]) then
    local exp = now + tonumber(ARGV[3])
    redis.call('HSET', lk, 'expires', exp)
    redis.call('HDEL', lk, 'held')
    redis.call('PEXPIRE', lk, ARGV[4])
    redis.call('ZADD', KEYS[3], exp, aid)
    if KEYS[6] then redis.call('ZADD', KEYS[6], exp, aid) end
    if l[5] then return {aid, l[1], exp, l[5]} end
    return {aid, l[1], exp}
  end
end
"""

RELEASE = """
-- keys: lease:{a} leases reserved wcount reserved_cost pending parked nissued
-- argv: assignment_id worker('' = any) expired_before_ms('' = no check) allow_submitting
--       key_prefix held_only('1': only a reservation still held in an inbox)
-- answers {1, task, worker, held (1/0), task_id ('' if the lease has none), gold, expires}
-- or {0, reason}.
-- A reservation still held in an inbox (never popped) was never issued: its count in
-- nissued (and the gold counters) is taken back and the task leaves the worker's seen set,
-- so the gold schedule and the gold pool see only what the annotator was really given.
local lease = redis.call('HMGET', KEYS[1], 'task', 'worker', 'cost', 'expires', 'submitting',
                         'held', 'gold', 'cat', 'tid')
if not lease[1] then return {0, 'missing'} end
if ARGV[2] ~= '' and lease[2] ~= ARGV[2] then return {0, 'forbidden'} end
if lease[5] and ARGV[4] ~= '1' then return {0, 'submitting'} end
if ARGV[3] ~= '' and tonumber(lease[4]) >= tonumber(ARGV[3]) then return {0, 'live'} end
if ARGV[6] == '1' and not lease[6] then return {0, 'issued'} end
local task = lease[1]
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], task, -1)
redis.call('HINCRBY', KEYS[4], lease[2], -1)
redis.call('INCRBYFLOAT', KEYS[5], -tonumber(lease[3]))
if lease[6] then
  redis.call('SREM', ARGV[5] .. 'seen:' .. lease[2], task)
  redis.call('HINCRBY', KEYS[8], lease[2], -1)
  if lease[7] == '1' then
    redis.call('HINCRBY', KEYS[8], 'g' .. lease[2], -1)
    if lease[8] and lease[8] ~= '' then
      redis.call('HINCRBY', KEYS[8], 'g' .. lease[2] .. ':' .. lease[8], -1)
    end
  end
end
local s = redis.call('ZSCORE', KEYS[7], task)
if s then
  redis.call('ZREM', KEYS[7], task)
  redis.call('ZADD', KEYS[6], s, task)
end
return {1, task, lease[2], lease[6] and 1 or 0, lease[9] or '', lease[7] or '0', lease[4]}
"""


# the scripts loaded per client: a Scripts, a lock or a reaper pass made again on the same
# client costs a dict lookup, not a SCRIPT LOAD round trip per script
_loaded: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def load_script(redis, source: str):
    """``register_script`` plus a ``SCRIPT LOAD``, once per client and script, so the first
    EVALSHA never meets NOSCRIPT: redis-py recovers from that on a real server, but the
    embedded server of ``labelq demo`` (fakeredis over TCP) answers it by closing the
    connection. A server that lost its scripts later (a restart, ``SCRIPT FLUSH``) is
    handled where scripts run: ``Script.__call__`` reloads, and :class:`ScriptPipeline`
    reruns a call that met NOSCRIPT through it."""
    per_client = _loaded.get(redis)
    if per_client is None:
        per_client = _loaded[redis] = {}
    script = per_client.get(source)
    if script is None:
        script = redis.register_script(source)
        redis.script_load(source)
        per_client[source] = script
    return script


@dataclass(frozen=True)
class ReserveResult:
    ok: bool
    reason: str


class Released(NamedTuple):
    """What ``RELEASE`` returned to the pool. ``held``: a reservation still in an inbox,
    never issued to the annotator (an expired one of those is not an expired assignment)."""
    ok: bool
    task: int  # seq
    worker: int  # seq
    held: bool
    task_id: int | None  # the task's SQL id, when the lease carried it
    gold: bool
    expires_ms: int


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class ScriptPipeline:
    """Script calls sent in one round trip as plain ``EVALSHA`` (the scripts were loaded
    when :class:`Scripts` was made). redis-py's own pipeline would first ask ``SCRIPT
    EXISTS`` on every execute — a second round trip. A call that meets ``NOSCRIPT`` (the
    server lost its script cache) did not run; it is run again alone, through the
    ``Script`` object, which loads the script first.

    On a plain ``redis.Redis`` client the calls go straight over one pooled connection
    (pack, send, read each reply): redis-py's ``Pipeline`` object, its retry wrapper and
    its per-command hooks cost about as much CPU as the rest of a submit. A connection
    error is raised, not retried — a script may have run — and that connection closed.
    Other clients (fakeredis in unit tests) take redis-py's pipeline."""

    def __init__(self, redis) -> None:
        self._redis = redis
        self._calls: list = []

    def add(self, script, keys, args) -> None:
        self._calls.append((script, keys, args))

    def execute(self) -> list:
        if not self._calls:
            return []
        outs = self._send()
        for i, (out, (script, keys, args)) in enumerate(zip(outs, self._calls)):
            if isinstance(out, NoScriptError):
                outs[i] = script(keys=keys, args=args)
            elif isinstance(out, Exception):
                raise out
        return outs

    def _send(self) -> list:
        cmds = [("EVALSHA", script.sha, len(keys), *keys, *args)
                for script, keys, args in self._calls]
        pool = getattr(self._redis, "connection_pool", None)
        if type(self._redis) is not Redis or type(pool) is not ConnectionPool:
            pipe = self._redis.pipeline(transaction=False)
            for cmd in cmds:
                pipe.execute_command(*cmd)
            return pipe.execute(raise_on_error=False)
        conns = _conns_of(pool)
        conn = conns.get()
        try:
            conn.send_packed_command(_pack(conn, cmds))
            outs: list = []
            for _ in cmds:
                try:
                    outs.append(conn.read_response())
                except ResponseError as exc:  # this reply only; the next ones follow
                    outs.append(exc)
            return outs
        except BaseException:
            conn.disconnect()
            raise
        finally:
            conns.put(conn)


class _Connections:
    """Connections a pool lent for script pipelines, kept idle here between uses: taking
    one back and returning it is a list pop and append, where the pool's own
    ``get_connection``/``release`` (locks, fork checks, metrics hooks) cost about as much
    as packing and sending the commands. Before reuse an idle connection is checked the
    way the pool checks one (nothing readable: no stale data, not closed by the server —
    a Redis restart) and reconnected if not. Forgotten after a fork."""

    def __init__(self, pool) -> None:
        self.pool = pool
        self.pid = os.getpid()
        self.idle: list = []

    def get(self):
        if self.pid != os.getpid():
            self.pid, self.idle = os.getpid(), []
        try:
            conn = self.idle.pop()
        except IndexError:
            return self.pool.get_connection()  # lent for good
        try:
            stale = conn.can_read()
        except Exception:  # noqa: BLE001 - a broken socket: reconnect below
            stale = True
        if stale:
            conn.disconnect()
            conn.connect()
        return conn

    def put(self, conn) -> None:
        if self.pid == os.getpid():
            self.idle.append(conn)


_connections: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_connections_lock = threading.Lock()


def _conns_of(pool) -> _Connections:
    got = _connections.get(pool)
    if got is None:
        with _connections_lock:
            got = _connections.get(pool)
            if got is None:
                got = _connections[pool] = _Connections(pool)
    return got


def _pack(conn, cmds: list) -> list:
    """The commands in the wire format, as chunks for ``send_packed_command``: hiredis packs
    a tuple of str/bytes/int in C; other arguments (numpy integers, say) go through
    redis-py's encoder."""
    if hiredis is not None:
        try:
            return [b"".join([hiredis.pack_command(cmd) for cmd in cmds])]
        except TypeError:
            pass
    return conn.pack_commands(cmds)


class Scripts:
    """The scripts registered on one Redis client (EVALSHA with a reload on NOSCRIPT)."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self._reserve = load_script(redis, RESERVE)
        self._begin = load_script(redis, SUBMIT_BEGIN)
        self._finish = load_script(redis, SUBMIT_FINISH)
        self._release = load_script(redis, RELEASE)
        self._candidates = load_script(redis, CANDIDATES)
        self._candidates_many = load_script(redis, CANDIDATES_MANY)
        self._pop = load_script(redis, POP_INBOX)

    def pipeline(self) -> "ScriptPipeline":
        """A pipeline for the ``pipeline=`` argument of the methods below."""
        return ScriptPipeline(self.redis)

    def _run(self, script, keys, args, pipeline):
        if pipeline is None:
            return script(keys=keys, args=args)
        if isinstance(pipeline, ScriptPipeline):
            return pipeline.add(script, keys, args)
        return script(keys=keys, args=args, client=pipeline)

    def reserve(self, k: Keys, *, task: int, worker: int, cap: int | None,
                capacity: int | None, cost: float, budget: float | None,
                assignment_id: str, expires_ms: int, key_ttl_ms: int,
                task_id: int | None = None, category: int | None = None,
                pipeline=None, inbox: bool = False, row: str | None = None,
                expect_issued: tuple[int, int] | None = None,
                empty_inbox: bool = False, max_open: int | None = None,
                now_ms: int | None = None) -> ReserveResult:
        """``inbox``: hold the reservation in the worker's inbox. ``empty_inbox`` (a
        decision made at once): refuse with ``inbox`` if the worker's inbox is not empty,
        and with ``open`` if the worker holds ``max_open`` open assignments (at ``now_ms``).
        ``expect_issued``: the worker's (issued, gold issued) counts a gold-schedule
        decision was made on; the script answers ``stale`` if another decision moved them."""
        if inbox and empty_inbox:
            raise ValueError("a reservation is either held in the inbox or made at once")
        keys = [k.seen(worker), k.gold, k.nlabels, k.reserved, k.wcount, k.spent,
                k.reserved_cost, k.lease(assignment_id), k.leases, k.pending, k.parked,
                k.nissued]
        if inbox or empty_inbox:
            keys.append(k.inbox(worker))
        if empty_inbox and max_open is not None:
            keys.append(k.open_leases(worker))
        args = [task, worker, -1 if cap is None else cap,
                -1 if capacity is None else capacity, repr(float(cost)),
                -1 if budget is None else repr(float(budget)), assignment_id, expires_ms,
                key_ttl_ms, "" if task_id is None else int(task_id),
                "" if category is None else int(category), row or ""]
        if expect_issued is not None:
            args += [int(expect_issued[0]), int(expect_issued[1])]
        if empty_inbox:
            args += ([] if expect_issued is not None else ["", ""]) + ["empty"]
            if max_open is not None:
                args += [int(max_open), k.prefix, int(now_ms)]
        out = self._run(self._reserve, keys, args, pipeline)
        return None if pipeline is not None else self.reserve_result(out)

    @staticmethod
    def reserve_result(out) -> ReserveResult:
        """What :meth:`reserve` returns, from the script's raw reply (pipelined calls)."""
        return ReserveResult(bool(int(out[0])), _s(out[1]))

    def submit_begin(self, k: Keys, assignment_id: str, worker: int, now_ms: int,
                     pipeline=None):
        """('ok', task, gold, cost, task_id or None) or (reason,) with reason
        missing/forbidden/expired. With ``pipeline`` the call is only queued there; pass
        its reply to :meth:`begin_result`."""
        out = self._run(self._begin, [k.lease(assignment_id)], [worker, now_ms], pipeline)
        if pipeline is not None:
            return None
        return self.begin_result(out)

    @staticmethod
    def begin_result(out):
        """The tuple :meth:`submit_begin` returns, from the script's raw reply."""
        if _s(out[0]) != "ok":
            return (_s(out[0]),)
        tid = _s(out[4]) if len(out) > 4 else ""
        return ("ok", int(out[1]), _s(out[2]) == "1", float(out[3]), int(tid) if tid else None)

    def submit_finish(self, k: Keys, assignment_id: str, cap: int | None,
                      pipeline=None, wake_ttl_ms: int | None = None) -> int:
        """0: nothing to finish; 1: finished; 2: finished and ``apply_wanted`` was set by
        this call (only with ``wake_ttl_ms``): the caller must wake the applier."""
        keys = [k.lease(assignment_id), k.leases, k.nlabels, k.reserved, k.spent,
                k.reserved_cost, k.pending, k.parked]
        args = [assignment_id, -1 if cap is None else cap]
        if wake_ttl_ms is not None:
            keys.append(k.apply_wanted)
            args.append(int(wake_ttl_ms))
        out = self._run(self._finish, keys, args, pipeline)
        return None if pipeline is not None else int(out)

    def candidates(self, k: Keys, worker: int, *, cap: int | None = None, offset: int = 0,
                   count: int = 64, tasks=None, enough: int = 0,
                   pipeline=None) -> tuple[list, list, int] | None:
        """(eligible, settled, n) among the top ``count`` of ``pending`` from ``offset``, or
        among ``tasks`` (no cap: gold). ``n`` is how many were read, or -1 when the scan
        stopped early because ``enough`` (> 0) settled candidates turned up. With
        ``pipeline`` (no ``tasks``) the call is only queued there."""
        keys = [k.pending, k.seen(worker), k.nlabels, k.reserved, k.applied]
        args = [-1 if cap is None or tasks is not None else cap, offset, count, int(enough)]
        if tasks is not None:
            if len(tasks) == 0:
                return [], [], 0
            args += [int(t) for t in tasks]
        out = self._run(self._candidates, keys, args, pipeline)
        if pipeline is not None:
            return None
        ok, settled, n = out
        return list(ok), list(settled), int(n)

    def candidates_many(self, k: Keys, workers: list[int], *, cap: int | None, count: int,
                        enough: list[int]) -> list[tuple[list, list]]:
        """(eligible, settled) for each of ``workers`` among the top ``count`` of
        ``pending`` — :meth:`candidates` for many workers in one call, each task's counters
        read once; worker i's scan stops at ``enough[i]`` settled candidates (0: all)."""
        if not workers:
            return []
        keys = [k.pending, k.nlabels, k.reserved, k.applied, *(k.seen(w) for w in workers)]
        args = [-1 if cap is None else cap, int(count), *(int(e) for e in enough)]
        out = self._candidates_many(keys=keys, args=args)
        return [(list(out[2 * i]), list(out[2 * i + 1])) for i in range(len(workers))]

    def pop_inbox(self, k: Keys, worker: int, now_ms: int, lease_ms: int, key_ttl_ms: int,
                  min_left_ms: int = 1_000, pipeline=None, max_open: int | None = None):
        """None (inbox empty), "unbuilt" (no hot state) or (assignment id, task,
        expires_ms, row) with the lease started now; ``row`` is the task's ``[external id,
        category, payload]`` when the reservation carries it, else None. ``max_open``: when
        the worker holds that many open assignments, the oldest of them instead (its lease
        as it was). With ``pipeline`` the call is only queued there; pass its reply to
        :meth:`pop_result`."""
        keys = [k.inbox(worker), k.active, k.leases, k.meta, k.requests]
        args = [worker, now_ms, lease_ms, key_ttl_ms, k.prefix, min_left_ms]
        if max_open is not None:
            keys.append(k.open_leases(worker))
            args.append(int(max_open))
        out = self._run(self._pop, keys, args, pipeline)
        return None if pipeline is not None else self.pop_result(out)

    @staticmethod
    def pop_result(out):
        """What :meth:`pop_inbox` returns, from the script's raw reply."""
        if not out:
            return None
        if len(out) == 1:
            return "unbuilt"
        row = json.loads(out[3]) if len(out) > 3 else None
        return (_s(out[0]), int(out[1]), int(out[2]), row)

    def release(self, k: Keys, assignment_id: str, *, worker: int | None = None,
                expired_before_ms: int | None = None, allow_submitting: bool = False,
                held_only: bool = False, pipeline=None):
        """A :class:`Released` (``(True, task, worker, …)``) when released, else
        ``(False, reason)``. ``held_only``: release only a reservation still held in an
        inbox (``(False, 'issued')`` once its worker has taken it). With ``pipeline`` the
        call is only queued there (returns None)."""
        keys = [k.lease(assignment_id), k.leases, k.reserved, k.wcount, k.reserved_cost,
                k.pending, k.parked, k.nissued]
        args = [assignment_id, "" if worker is None else worker,
                "" if expired_before_ms is None else expired_before_ms,
                "1" if allow_submitting else "0", k.prefix, "1" if held_only else "0"]
        out = self._run(self._release, keys, args, pipeline)
        if pipeline is not None:
            return None
        if int(out[0]) == 1:
            return Released(True, int(out[1]), int(out[2]), bool(int(out[3])),
                            int(out[4]) if out[4] not in (b"", "") else None,
                            _s(out[5]) == "1", int(out[6]))
        return (False, _s(out[1]))
