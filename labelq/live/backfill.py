"""Bulk writes from numpy arrays, and ``pending`` streamed in behind a lazy rebuild (issue 44).

**Bulk writes.** :func:`bulk_write` sends many members of one key as one binary string
(the arrays' bytes) to the ``BULK`` script (``lua/bulk.lua``), which unpacks them in Redis:
redis-py packed a 1M-member ``ZADD`` argument by argument (~3 s of Python in a rebuild).
A server without Lua's ``struct`` library (fakeredis: ``labelq demo``, the unit tests) gets
the same writes as plain commands.

**Lazy rebuild.** After losing Redis the first request rebuilt the whole hot state,
``pending`` included (1,000,000 members: most of a 26–30 s flushed cold start under load),
before anyone got work. :func:`labelq.live.rebuild.ensure_hot` now asks the rebuild for only
the ``first`` open tasks of highest priority (those a decision looks at first) and the plan
for the rest, in descending priority: their seqs in ``warm`` (int64), and in ``meta``
``warming`` (how many), ``warm_pos`` (how many are in) and ``warm_at`` (ms of the last
chunk). The ``nlabels`` and ``applied`` counts and the ``seen`` entries of the planned
tasks are held back too (they were most of what was left before the first request: 200,000
entries each at 1M tasks / 200k labels): the rebuild keeps them in ``warm_base`` (for each plan
position with any: the position, the task, the two counts and where its workers start in
``warm_seen``; a script finds a chunk's by binary search) and ``warm_seen``
(worker seqs), with ``warm_ix`` (each task's position, -1 for none). Everything else of the
hot state (the other tasks' counters and ``seen``, ``wcount``, ``spent``, ``nissued``,
gold, snapshot) is complete, the project is ``built`` and served; a thread of the process
that rebuilt streams the rest in (:func:`backfill`), a chunk at a time, at priorities
computed from its state caught up just before; the beat's upkeep resumes a stream nobody
moved for ``STALE_MS`` (its process died: :func:`resume_stalled`).

**The rule for what is held back.** A planned task's ``nlabels`` and ``applied`` fields and
its ``seen`` memberships hold, until its chunk, only what live writers added since the
rebuild; the chunk (``BACKFILL``, one Lua call with the task's ``ZADD``) *adds* the
rebuild's counts (``HINCRBY``, ``SADD``), never sets them. So every writer that only adds
(``SUBMIT_FINISH``'s ``HINCRBY nlabels``, ``RESERVE``'s ``SADD seen``, the applier's
``HINCRBY applied``) is right whether it runs before or after the chunk: the sum is the
same. The one absolute writer, the applier's ``HSET applied`` of a replayed task's count
from SQL (labels of an applier that died before its Redis writes), goes through
``APPLIED_SET`` (:func:`set_applied`), which subtracts the rebuild's count where the task's
position is not streamed yet (in the same script: a chunk cannot come in between).
Nothing else writes those fields (``RELEASE`` takes a task out of ``seen`` only for a
reservation held in an inbox, which came from ``pending``), and nothing else puts a planned
task into ``pending`` before its chunk: a task a model no longer settles alone stays in
``settled`` while :func:`unstreamed` (the stream skips it; the applier's next sync puts it
back, its counts complete). Readers: decisions read them
only for tasks in ``pending`` (streamed, so complete); ``RESERVE`` of a task outside it is
the submit of a lease lost with Redis (``Submitter._recover``), which checks SQL for the
worker's label first, and whose cap check cannot be fooled: a lost lease was counted
against the cap before the flush, so recorded labels plus lost leases never exceed it.

Why the stream is safe: a task in the plan was never in ``pending`` since the rebuild, so no
decision could choose it and no reservation made now holds it. A lost lease taken again
can, and its label counts; so the chunk reads the task's counters after adding the
rebuild's and puts it in ``pending`` only below the cap ``meta`` names now (``parked``
when only live leases hold it at the cap, ``RESERVE``'s rule), and not when it is gold
(marked since) or in ``settled``; ``ZADD NX`` otherwise, as the full rebuild would have. The
script compares the epoch and the position, so an older rebuild's stream or a second
streamer writes nothing. What an annotator sees meanwhile: decisions choose among the
highest priorities, which are in; one who has seen all of those is told there is no work
until the next chunk is in. A priority the applier pushes for a task not in yet (``ZADD
XX``) is skipped, and the chunk writes the priority of its streamer's state, at most
``MAX_AGE`` seconds behind the applier. A server without Lua's ``struct`` (fakeredis) gets
the plan alone (counters written in full by the rebuild) and the same checks in a
WATCH/MULTI transaction.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from redis.exceptions import ResponseError
from sqlalchemy.engine import Engine

from .hotstate import StateCache
from .redis.keys import Keys
from .redis.wire import load_script, text

__all__ = ["FIRST", "CHUNK", "STALE_MS", "packs", "bulk_write", "plan", "warming",
           "unstreamed", "set_applied", "backfill_step", "backfill", "start_backfill", "resume_stalled"]

log = logging.getLogger(__name__)

FIRST = 20_000  # tasks a lazy rebuild puts in pending itself (highest priorities)
CHUNK = 50_000  # tasks per backfill step (~0.1 s of Redis on a quiet machine)
STALE_MS = 10_000  # a stream not moved for this long is resumed by the beat
MAX_AGE = 1.0  # the streamer's state is caught up with SQL when older than this (s)
_PER_CALL = 100_000  # records per BULK call

_ZADD = np.dtype([("s", "<f8"), ("m", "<i8")])
_PAIR = np.dtype([("a", "<i8"), ("b", "<i8")])

# per client: whether its server's Lua has ``struct`` (a real Redis: yes; fakeredis: no)
_packs: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def packs(redis: Any) -> bool:
    """Whether the server unpacks binary records in Lua (asked once per client)."""
    got = _packs.get(redis)
    if got is None:
        try:
            got = int(redis.eval("return type(struct) == 'table' and 1 or 0", 0)) == 1
        except ResponseError:
            got = False
        _packs[redis] = got
    return got


def _records(op: str, members: np.ndarray, values: np.ndarray | None) -> np.ndarray:
    """The records of ``packed.lua`` for ``op``, as a numpy array (its bytes are sent)."""
    if op == "SADD":
        return np.ascontiguousarray(members, dtype="<i8")
    if op in ("ZADD", "ZADDNX"):
        rec = np.empty(members.size, dtype=_ZADD)
        rec["s"], rec["m"] = values, members
    else:  # HSET: field, value
        rec = np.empty(members.size, dtype=_PAIR)
        rec["a"], rec["b"] = members, values
    return rec


def bulk_write(redis: Any, key: str, op: str, members: np.ndarray,
               values: np.ndarray | None = None) -> None:
    """``ZADD`` / ``ZADDNX`` (``values``: the scores), ``HSET`` (``values``: the values,
    integers) or ``SADD`` of ``members`` (integers) into ``key``."""
    if members.size == 0:
        return
    if values is not None and values.shape != members.shape:
        raise ValueError(f"bulk_write: {members.size} members, {values.size} values")
    if not packs(redis):
        _plain(redis, key, op, members, values)
        return
    script = load_script(redis, _bulk_source())
    for i in range(0, members.size, _PER_CALL):
        part = _records(op, members[i:i + _PER_CALL],
                        None if values is None else values[i:i + _PER_CALL])
        script(keys=[key], args=[op, part.tobytes()])


def _plain(redis: Any, key: str, op: str, members: np.ndarray,
           values: np.ndarray | None) -> None:
    pipe = redis.pipeline(transaction=False)
    step = 10_000
    for i in range(0, members.size, step):
        m = members[i:i + step].tolist()
        if op == "SADD":
            pipe.sadd(key, *m)
            continue
        assert values is not None
        v = values[i:i + step].tolist()
        if op == "HSET":
            pipe.hset(key, mapping=dict(zip(m, v, strict=True)))
        else:
            pipe.zadd(key, dict(zip(m, v, strict=True)), nx=op == "ZADDNX")
    pipe.execute()


_sources: dict[str, str] = {}


def _bulk_source() -> str:
    from .redis.scripts import lua_source
    if "bulk" not in _sources:
        _sources["bulk"] = lua_source("bulk")
        _sources["backfill"] = lua_source("backfill")
        _sources["applied_set"] = lua_source("applied_set")
    return _sources["bulk"]


def _backfill_source() -> str:
    _bulk_source()
    return _sources["backfill"]


def _applied_set_source() -> str:
    _bulk_source()
    return _sources["applied_set"]


def plan(redis: Any, k: Keys, rest: np.ndarray, *,
         held: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
         ) -> dict[str, int]:
    """Write the plan of the tasks ``rest`` (seqs, in the order they are to come in) to
    ``warm``; returns the ``meta`` fields the rebuild sets with ``built`` (none: nothing
    to stream). ``held``: (task count, ``nlabels`` and ``applied`` by task seq, the
    ``seen`` pairs' worker and task seqs, planned tasks only) the rebuild held back, for
    the chunks to add (module docstring)."""
    if rest.size == 0:
        return {}
    pipe = redis.pipeline(transaction=False)
    pipe.set(k.warm, np.ascontiguousarray(rest, dtype="<i8").tobytes())
    if held is not None:
        n_tasks, nlabels, applied, seen_w, seen_t = held
        ix = np.full(n_tasks, -1, dtype="<i4")
        ix[rest] = np.arange(rest.size)
        at = ix[seen_t]
        if at.size and at.min() < 0:
            raise ValueError("plan: a seen entry held back for a task not in the plan")
        per = np.bincount(at, minlength=rest.size)
        nl, ap = nlabels[rest], applied[rest]
        keep = np.flatnonzero((nl > 0) | (ap > 0) | (per > 0))  # positions with any
        base = np.empty((keep.size + 1, 5), dtype="<i4")
        base[:-1, 0], base[:-1, 1] = keep, rest[keep]
        base[:-1, 2], base[:-1, 3] = nl[keep], ap[keep]
        base[:-1, 4] = (np.cumsum(per) - per)[keep]
        base[-1] = (rest.size, -1, 0, 0, at.size)  # the sentinel: the end
        pipe.set(k.warm_base, base.tobytes())
        pipe.set(k.warm_seen, np.ascontiguousarray(
            seen_w[np.argsort(at, kind="stable")], dtype="<i4").tobytes())
        pipe.set(k.warm_ix, ix.tobytes())
    pipe.execute()
    return {"warming": int(rest.size), "warm_pos": 0, "warm_at": int(time.time() * 1000)}


def unstreamed(redis: Any, k: Keys, tasks: list[int]) -> list[bool]:
    """Whether each of ``tasks`` is in a lazy rebuild's plan and not streamed in yet (its
    counters and ``seen`` entries still held back). The position is read before the
    plan's entries, so a task seen as streamed is; one seen as not may have come in
    meanwhile (callers leave it alone and look again later)."""
    pos = redis.hget(k.meta, "warm_pos")
    if pos is None or not tasks:
        return [False] * len(tasks)
    pipe = redis.pipeline(transaction=False)
    for t in tasks:
        pipe.getrange(k.warm_ix, 4 * int(t), 4 * int(t) + 3)
    return [len(raw) == 4 and int(np.frombuffer(raw, dtype="<i4")[0]) >= int(pos)
            for raw in pipe.execute()]


def set_applied(redis: Any, k: Keys, counts: dict[int, int], pipeline: Any = None) -> None:
    """``HSET applied`` of the tasks' applied counts from SQL (the applier's replay),
    less the rebuild's count for a task whose chunk is not streamed yet (``APPLIED_SET``:
    module docstring). ``pipeline``: queued there."""
    if not counts:
        return
    client = redis if pipeline is None else pipeline
    if not packs(redis):  # (no plan holds counts back on such a server)
        client.hset(k.applied, mapping=counts)
        return
    args: list[int] = []
    for task, n in sorted(counts.items()):
        args += [int(task), int(n)]
    script = load_script(redis, _applied_set_source())
    script(keys=[k.meta, k.applied, k.warm_ix, k.warm_base], args=args, client=client)


def warming(redis: Any, k: Keys) -> bool:
    """Whether the project's ``pending`` is still being streamed in."""
    return bool(redis.hexists(k.meta, "warming"))


def backfill_step(engine: Engine, redis: Any, project_id: int, k: Keys, cache: StateCache,
                  *, chunk: int = CHUNK) -> int | None:
    """Stream the next ``chunk`` tasks of the plan in (their counts held back, then
    ``pending``); returns how many positions of the plan (0: another streamer moved
    first, or the epoch moved: try again), None when there is nothing (more) to
    stream."""
    epoch, pos, total = redis.hmget(k.meta, "epoch", "warm_pos", "warming")
    if pos is None or total is None:
        return None
    start, total_n = int(pos), int(total)
    end = min(total_n, start + chunk)
    raw = redis.getrange(k.warm, start * 8, end * 8 - 1) if end > start else b""
    tasks = np.frombuffer(raw, dtype="<i8")
    if tasks.size != end - start:  # the plan is gone (a newer rebuild deleted it)
        return None
    hot = cache.get(engine, redis, project_id, max_age=MAX_AGE)
    if hot.epoch != int(epoch or 0):
        return 0  # the epoch moved meanwhile (a gold mark): read again
    # a task marked gold since the plan (``gold mark`` bumps the epoch; the state is then
    # of the new one, its view with the mark) goes to ``gold``, not here
    tasks = tasks[~hot.view.is_gold[tasks]]
    with hot.lock:
        pri = np.asarray(hot.policy.priority(hot.state, tasks), dtype="<f8") \
            if tasks.size else np.empty(0)
    blob = _records("ZADDNX", tasks, pri).tobytes()
    args = [text(epoch or b"0"), str(start), str(end), blob, str(int(time.time() * 1000)),
            k.prefix]
    keys = [k.meta, k.pending, k.warm, k.warm_base, k.warm_seen, k.warm_ix, k.nlabels,
            k.applied, k.reserved, k.parked, k.settled, k.gold]
    if packs(redis):
        out = int(load_script(redis, _backfill_source())(keys=keys, args=args))
    else:
        out = _plain_step(redis, keys, args, tasks, pri, total_n)
    return max(out, 0)


def _plain_step(redis: Any, keys: list[str], args: list[Any], tasks: np.ndarray,
                pri: np.ndarray, total: int) -> int:
    """``BACKFILL`` without ``struct`` (fakeredis): the same checks and writes in a
    WATCH/MULTI transaction (no counts were held back: the rebuild wrote them)."""
    from redis.exceptions import WatchError
    meta, pending, warm, base, seen, ix, nlabels, _applied, reserved, parked, settled, \
        gold = keys
    with redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(meta, nlabels, reserved, settled, gold)
            epoch, pos, cap = pipe.hmget(meta, "epoch", "warm_pos", "cap")
            if text(epoch or b"0") != args[0] or pos is None or text(pos) != args[1]:
                return -1
            into: dict[str, dict[int, float]] = {pending: {}, parked: {}}
            if tasks.size:
                members = tasks.tolist()
                skip = pipe.smismember(gold, members)
                out = pipe.smismember(settled, members)
                done = pipe.hmget(nlabels, members)
                live = pipe.hmget(reserved, members)
                limit = int(cap) if cap not in (None, b"", "") else -1
                for i, (t, p) in enumerate(zip(members, pri.tolist(), strict=True)):
                    if skip[i] or out[i]:
                        continue
                    d, h = int(done[i] or 0), int(live[i] or 0)
                    if limit < 0 or d + h < limit:
                        into[pending][t] = p
                    elif d < limit:
                        into[parked][t] = p
            pipe.multi()
            for key, scores in into.items():
                if scores:
                    pipe.zadd(key, scores, nx=True)
            if int(args[2]) >= total:
                pipe.delete(warm, base, seen, ix)
                pipe.hdel(meta, "warming", "warm_pos", "warm_at")
            else:
                pipe.hset(meta, mapping={"warm_pos": args[2], "warm_at": args[4]})
            pipe.execute()
        except WatchError:
            return -1
    return int(args[2]) - int(args[1])


def backfill(engine: Engine, redis: Any, project_id: int, k: Keys,
             cache: StateCache | None = None) -> int:
    """Stream the whole rest of the plan in; returns how many of its tasks this call
    streamed."""
    cache = cache if cache is not None else StateCache()
    n = 0
    started = time.monotonic()
    idle = 0
    while True:
        got = backfill_step(engine, redis, project_id, k, cache)
        if got is None:
            break
        n += got
        idle = idle + 1 if got == 0 else 0
        if idle:  # another streamer's step, or a state catching up with a new epoch
            if idle > 600:  # a minute without a step of ours: the beat resumes it
                break
            time.sleep(0.1)
    if n:
        log.info("project %s: %s tasks streamed into pending (%.2f s)", project_id, n,
                 time.monotonic() - started)
    return n


def start_backfill(engine: Engine, redis: Any, project_id: int, k: Keys,
                   cache: StateCache | None,
                   before: Callable[[], None] | None = None) -> threading.Thread:
    """:func:`backfill` in a daemon thread (what the beat resumes if this process dies),
    after ``before`` (a lazy rebuild's snapshot: :func:`.rebuild.ensure_hot`)."""
    def run() -> None:
        try:
            if before is not None:
                before()
            backfill(engine, redis, project_id, k, cache)
        except Exception:  # noqa: BLE001 - the beat resumes a stalled stream
            log.warning("project %s: streaming pending stopped; the beat resumes it",
                        project_id, exc_info=True)
    thread = threading.Thread(target=run, name=f"labelq-backfill-{project_id}", daemon=True)
    thread.start()
    return thread


def resume_stalled(engine: Engine, redis: Any, project_id: int, k: Keys,
                   cache: StateCache | None, *, stale_ms: int = STALE_MS) -> int:
    """Finish a stream that has not moved for ``stale_ms`` (the process streaming it died);
    returns how many tasks this added."""
    at = redis.hget(k.meta, "warm_at")
    if at is None or time.time() * 1000 - int(at) < stale_ms:
        return 0
    return backfill(engine, redis, project_id, k, cache)
