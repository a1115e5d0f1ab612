"""The Lua scripts of the hot state, called with typed results.

Every check-then-act on the hot state runs as one script, so it is atomic. The scripts are
the ``.lua`` files next to this module (``lua/``), each opening with the race it closes and
the keys it touches; a line ``--#include NAME.lua`` takes in a shared helper. In short:

* ``RESERVE`` — the cap / capacity / budget / seen checks and the increments in one step,
  so two requests cannot both pass the checks and over-issue.
* ``SUBMIT_BEGIN`` — validates the lease and marks it ``submitting`` (the reaper waits).
* ``SUBMIT_FINISH`` — moves the reservation to "done" exactly once (the lease is the token).
* ``CANDIDATES`` / ``CANDIDATES_SCAN`` / ``CANDIDATES_MANY`` — read-only candidate windows;
  ``RESERVE`` re-checks.
* ``POP_INBOX`` — hands out a held reservation, starting its lease, at most once.
* ``RELEASE`` — returns a task to the pool exactly once (decline, expiry, reclaim).
* ``OPEN_LIST`` — the worker's open assignments, by the rule ``RESERVE`` and ``POP_INBOX``
  apply (``open_leases.lua``).
* ``GOLD_MARK`` — ordinary tasks become gold questions, refused while one has a live lease.

Each call answers a frozen dataclass on success and a :class:`Refusal` otherwise (its
value is the script's word for it). With ``pipeline=`` a call is only queued there; the
``*_result`` static methods turn the pipeline's raw replies into the same typed results.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from .keys import Keys
from .wire import ScriptPipeline, load_script, text

__all__ = ["Scripts", "ScriptPipeline", "Refusal", "Reserved", "Began", "Finished",
           "Popped", "OpenLease", "GoldMarked", "GoldMarkLeased", "Inbox", "Released",
           "Candidates", "Scan", "lua_source", "load_script"]


class Refusal(str, enum.Enum):
    """Why a script did not act (the value is the script's own word)."""

    MISSING = "missing"  # no such lease (never issued, finished, released, expired key)
    FORBIDDEN = "forbidden"  # the lease is another worker's
    EXPIRED = "expired"  # SUBMIT_BEGIN: the lease ran out
    SUBMITTING = "submitting"  # RELEASE: its label is being written to SQL
    LIVE = "live"  # RELEASE with expired_before_ms: not expired yet
    ISSUED = "issued"  # RELEASE held_only: its worker has popped it
    SEEN = "seen"  # RESERVE: the worker has had this task
    CAP = "cap"  # RESERVE: labels + live leases at the task's cap
    CAPACITY = "capacity"  # RESERVE: the worker is at capacity
    BUDGET = "budget"  # RESERVE: spent + held + cost would pass the budget
    STALE = "stale"  # RESERVE: the gold-schedule counts moved since the decision
    INBOX = "inbox"  # RESERVE at once: the inbox was refilled meanwhile
    OPEN = "open"  # RESERVE at once: the worker holds max_open assignments already


@dataclass(frozen=True, slots=True)
class Reserved:
    """``RESERVE``'s answer: issued (``refusal is None``) or refused."""

    refusal: Refusal | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True, slots=True)
class Began:
    """``SUBMIT_BEGIN`` accepted the lease (now marked ``submitting``)."""

    task: int  # seq
    gold: bool
    cost: float
    task_id: int | None  # the task's SQL id, when the lease carries it


class Finished(enum.IntEnum):
    """``SUBMIT_FINISH``'s answer."""

    NOTHING = 0  # no lease: finished before (the call is idempotent)
    DONE = 1
    WAKE = 2  # done, and this call set ``apply_wanted``: the caller wakes the applier


@dataclass(frozen=True, slots=True)
class Popped:
    """An assignment ``POP_INBOX`` handed out (or an open one handed out again)."""

    assignment_id: str
    task: int  # seq
    expires_ms: int
    row: list[Any] | None  # [external id, category, payload] when the reservation carries it


class Inbox(enum.Enum):
    """``POP_INBOX`` handed out nothing."""

    EMPTY = "empty"
    UNBUILT = "unbuilt"  # the project has no hot state: rebuild it


@dataclass(frozen=True, slots=True)
class OpenLease:
    """An assignment its worker holds now (``OPEN_LIST``): issued, live, not being
    submitted."""

    assignment_id: str
    task: int  # seq
    expires_ms: int


@dataclass(frozen=True, slots=True)
class GoldMarked:
    """``GOLD_MARK`` moved the tasks from ``pending``/``parked`` to ``gold``;
    ``priorities``: each one's score there before (``None`` where it had none)."""

    priorities: list[float | None]


@dataclass(frozen=True, slots=True)
class GoldMarkLeased:
    """``GOLD_MARK`` refused, changing nothing: ``task`` has ``leases`` live leases."""

    task: int  # seq
    leases: int


@dataclass(frozen=True, slots=True)
class Released:
    """What ``RELEASE`` returned to the pool. ``held``: a reservation still in an inbox,
    never issued to the annotator (an expired one of those is not an expired assignment)."""

    task: int  # seq
    worker: int  # seq
    held: bool
    task_id: int | None  # the task's SQL id, when the lease carried it
    gold: bool
    expires_ms: int


@dataclass(frozen=True, slots=True)
class Candidates:
    """``CANDIDATES``' window: the eligible tasks (not seen, below the cap), the settled
    ones among them (nothing outstanding), and how many were looked at (-1: the scan
    stopped early with ``enough`` settled ones)."""

    eligible: list[int]
    settled: list[int]
    looked: int


@dataclass(frozen=True, slots=True)
class Scan:
    """``CANDIDATES_SCAN``'s answer: the settled tasks of the window the walk stopped at,
    the eligible ones of the first window that had any (when the caller had none yet), and
    the walk's resume point (``done``: it is over)."""

    settled: list[int]
    fallback: list[int]
    done: bool
    offset: int
    size: int
    jumped: bool
    scanned: int


Release = Released | Refusal
Pop = Popped | Inbox
Begin = Began | Refusal


@cache
def lua_source(name: str) -> str:
    """The script ``lua/NAME.lua`` with its ``--#include`` lines replaced by the files."""
    raw = (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    out = []
    for line in raw.splitlines(keepends=True):
        if line.startswith("--#include "):
            out.append(lua_source(line.split()[1].removesuffix(".lua")))
        else:
            out.append(line)
    return "".join(out)


def _ints(raw: Any) -> list[int]:
    return [int(t) for t in raw]


class Scripts:
    """The scripts registered on one Redis client (EVALSHA with a reload on NOSCRIPT)."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._reserve = load_script(redis, lua_source("reserve"))
        self._begin = load_script(redis, lua_source("submit_begin"))
        self._finish = load_script(redis, lua_source("submit_finish"))
        self._release = load_script(redis, lua_source("release"))
        self._decline_done = load_script(redis, lua_source("decline_done"))
        self._candidates = load_script(redis, lua_source("candidates"))
        self._candidates_many = load_script(redis, lua_source("candidates_many"))
        self._candidates_scan = load_script(redis, lua_source("candidates_scan"))
        self._pop = load_script(redis, lua_source("pop_inbox"))
        self._open_list = load_script(redis, lua_source("open_list"))
        self._gold_mark = load_script(redis, lua_source("gold_mark"))

    def pipeline(self) -> ScriptPipeline:
        """A pipeline for the ``pipeline=`` argument of the methods below."""
        return ScriptPipeline(self.redis)

    def _run(self, script: Any, keys: list[Any], args: list[Any], pipeline: Any) -> Any:
        if pipeline is None:
            return script(keys=keys, args=args)
        if isinstance(pipeline, ScriptPipeline):
            return pipeline.add(script, keys, args)
        return script(keys=keys, args=args, client=pipeline)

    # --- RESERVE -----------------------------------------------------------------------
    def reserve(self, k: Keys, *, task: int, worker: int, cap: int | None,
                capacity: int | None, cost: float, budget: float | None,
                assignment_id: str, expires_ms: int, key_ttl_ms: int,
                task_id: int | None = None, category: int | None = None,
                pipeline: Any = None, inbox: bool = False, row: str | None = None,
                expect_issued: tuple[int, int] | None = None,
                empty_inbox: bool = False, max_open: int | None = None,
                now_ms: int | None = None) -> Reserved | None:
        """``inbox``: hold the reservation in the worker's inbox. ``empty_inbox`` (a
        decision made at once): refuse with ``INBOX`` if the worker's inbox is not empty,
        and with ``OPEN`` if the worker holds ``max_open`` open assignments (at
        ``now_ms``). ``expect_issued``: the worker's (issued, gold issued) counts a
        gold-schedule decision was made on; refused ``STALE`` if another decision moved
        them. Returns None when only queued on ``pipeline``."""
        if inbox and empty_inbox:
            raise ValueError("a reservation is either held in the inbox or made at once")
        keys = [k.seen(worker), k.gold, k.nlabels, k.reserved, k.wcount, k.spent,
                k.reserved_cost, k.lease(assignment_id), k.leases, k.pending, k.parked,
                k.nissued]
        if inbox or empty_inbox:
            keys.append(k.inbox(worker))
        if empty_inbox and max_open is not None:
            keys.append(k.open_leases(worker))
        args: list[Any] = [task, worker, -1 if cap is None else cap,
                      -1 if capacity is None else capacity, repr(float(cost)),
                      -1 if budget is None else repr(float(budget)), assignment_id,
                      expires_ms, key_ttl_ms, "" if task_id is None else int(task_id),
                      "" if category is None else int(category), row or ""]
        if expect_issued is not None:
            args += [int(expect_issued[0]), int(expect_issued[1])]
        if empty_inbox:
            args += ([] if expect_issued is not None else ["", ""]) + ["empty"]
            if max_open is not None:
                args += [int(max_open), k.prefix, int(now_ms or 0)]
        out = self._run(self._reserve, keys, args, pipeline)
        return None if pipeline is not None else self.reserve_result(out)

    @staticmethod
    def reserve_result(out: Any) -> Reserved:
        """What :meth:`reserve` returns, from the script's raw reply (pipelined calls)."""
        return _RESERVED if int(out[0]) else Reserved(Refusal(text(out[1])))

    # --- SUBMIT_BEGIN / SUBMIT_FINISH ------------------------------------------------------
    def submit_begin(self, k: Keys, assignment_id: str, worker: int, now_ms: int,
                     pipeline: Any = None) -> Begin | None:
        """:class:`Began`, or the :class:`Refusal` ``MISSING``/``FORBIDDEN``/``EXPIRED``."""
        out = self._run(self._begin, [k.lease(assignment_id)], [worker, now_ms], pipeline)
        return None if pipeline is not None else self.begin_result(out)

    @staticmethod
    def begin_result(out: Any) -> Begin:
        """What :meth:`submit_begin` returns, from the script's raw reply."""
        word = text(out[0])
        if word != "ok":
            return Refusal(word)
        tid = text(out[4]) if len(out) > 4 else ""
        return Began(int(out[1]), text(out[2]) == "1", float(out[3]),
                     int(tid) if tid else None)

    def submit_finish(self, k: Keys, assignment_id: str, cap: int | None,
                      pipeline: Any = None,
                      wake_ttl_ms: int | None = None) -> Finished | None:
        """``WAKE`` (only with ``wake_ttl_ms``) tells the caller to wake the applier."""
        keys = [k.lease(assignment_id), k.leases, k.nlabels, k.reserved, k.spent,
                k.reserved_cost, k.pending, k.parked]
        args: list[Any] = [assignment_id, -1 if cap is None else cap]
        if wake_ttl_ms is not None:
            keys.append(k.apply_wanted)
            args.append(int(wake_ttl_ms))
        out = self._run(self._finish, keys, args, pipeline)
        return None if pipeline is not None else Finished(int(out))

    @staticmethod
    def finish_result(out: Any) -> Finished:
        return Finished(int(out))

    # --- CANDIDATES ----------------------------------------------------------------------
    def candidates(self, k: Keys, worker: int, *, cap: int | None = None, offset: int = 0,
                   count: int = 64, tasks: Any = None, enough: int = 0,
                   pipeline: Any = None) -> Candidates | None:
        """The window of the top ``count`` of ``pending`` from ``offset``, or of ``tasks``
        (no cap: gold); the scan stops once ``enough`` (> 0) settled ones turned up. With
        ``pipeline`` (no ``tasks``) the call is only queued there."""
        keys = [k.pending, k.seen(worker), k.nlabels, k.reserved, k.applied]
        args: list[Any] = [-1 if cap is None or tasks is not None else cap, offset, count,
                      int(enough)]
        if tasks is not None:
            if len(tasks) == 0:
                return Candidates([], [], 0)
            args += [int(t) for t in tasks]
        out = self._run(self._candidates, keys, args, pipeline)
        return None if pipeline is not None else self.candidates_result(out)

    @staticmethod
    def candidates_result(out: Any) -> Candidates:
        ok, settled, n = out
        return Candidates(_ints(ok), _ints(settled), int(n))

    def candidates_scan(self, k: Keys, worker: int, *, cap: int | None, offset: int,
                        size: int, enough: int, max_scan: int, settled_scan: int,
                        jumped: bool = False, scanned: int = 0,
                        has_fallback: bool = False) -> Scan:
        """The walk of a decision made at once over the windows of ``pending``
        (``lua/candidates_scan.lua``), from ``offset`` / ``size`` (a resume point of an
        earlier :class:`Scan`), up to the first window with settled candidates."""
        keys = [k.pending, k.seen(worker), k.nlabels, k.reserved, k.applied, k.leases]
        args = [-1 if cap is None else cap, offset, size, int(enough), max_scan,
                settled_scan, int(jumped), scanned, int(has_fallback)]
        settled, fallback, (done, off, sz, jmp, seen) = self._candidates_scan(keys=keys,
                                                                              args=args)
        return Scan(_ints(settled), _ints(fallback), bool(int(done)), int(off), int(sz),
                    bool(int(jmp)), int(seen))

    def candidates_many(self, k: Keys, workers: list[int], *, cap: int | None, count: int,
                        enough: list[int]) -> list[Candidates]:
        """:meth:`candidates` over the top ``count`` of ``pending`` for each of ``workers``
        in one call, each task's counters read once; worker i's scan stops at
        ``enough[i]`` settled candidates (0: all). ``looked`` is not reported (0)."""
        if not workers:
            return []
        keys = [k.pending, k.nlabels, k.reserved, k.applied, *(k.seen(w) for w in workers)]
        args = [-1 if cap is None else cap, int(count), *(int(e) for e in enough)]
        out = self._candidates_many(keys=keys, args=args)
        return [Candidates(_ints(out[2 * i]), _ints(out[2 * i + 1]), 0)
                for i in range(len(workers))]

    # --- POP_INBOX -----------------------------------------------------------------------
    def pop_inbox(self, k: Keys, worker: int, now_ms: int, lease_ms: int, key_ttl_ms: int,
                  min_left_ms: int = 1_000, pipeline: Any = None,
                  max_open: int | None = None) -> Pop | None:
        """:class:`Popped` with the lease started now, or ``Inbox.EMPTY`` /
        ``Inbox.UNBUILT``. ``max_open``: when the worker holds that many open
        assignments, the oldest of them instead (its lease as it was)."""
        keys = [k.inbox(worker), k.active, k.leases, k.meta, k.requests]
        args: list[Any] = [worker, now_ms, lease_ms, key_ttl_ms, k.prefix, min_left_ms]
        if max_open is not None:
            keys.append(k.open_leases(worker))
            args.append(int(max_open))
        out = self._run(self._pop, keys, args, pipeline)
        return None if pipeline is not None else self.pop_result(out)

    @staticmethod
    def pop_result(out: Any) -> Pop:
        """What :meth:`pop_inbox` returns, from the script's raw reply."""
        if not out:
            return Inbox.EMPTY
        if len(out) == 1:
            return Inbox.UNBUILT
        row = json.loads(out[3]) if len(out) > 3 else None
        return Popped(text(out[0]), int(out[1]), int(out[2]), row)

    # --- OPEN_LIST -----------------------------------------------------------------------
    def open_list(self, k: Keys, worker: int, now_ms: int) -> list[OpenLease]:
        """The worker's open assignments, oldest first (those that ended are dropped from
        ``open:{w}`` on the way, as ``RESERVE`` and ``POP_INBOX`` do)."""
        out = self._open_list(keys=[k.open_leases(worker)], args=[worker, now_ms, k.prefix])
        return [OpenLease(text(out[i]), int(out[i + 1]), int(float(out[i + 2])))
                for i in range(0, len(out), 3)]

    def gold_mark(self, k: Keys, tasks: list[int]) -> GoldMarked | GoldMarkLeased:
        """Move ``tasks`` (seqs) to ``gold`` at once, unless one has a live lease."""
        out = self._gold_mark(keys=[k.reserved, k.pending, k.parked, k.gold],
                              args=[int(t) for t in tasks])
        if int(out[0]) == 0:
            return GoldMarkLeased(int(out[1]), int(out[2]))
        return GoldMarked([None if v in (b"", "") else float(v) for v in out[1:]])

    # --- RELEASE -------------------------------------------------------------------------
    def release(self, k: Keys, assignment_id: str, *, worker: int | None = None,
                expired_before_ms: int | None = None, allow_submitting: bool = False,
                held_only: bool = False, declined_ms: int | None = None,
                keep_decision: bool = False, pipeline: Any = None) -> Release | None:
        """:class:`Released`, or the :class:`Refusal` ``MISSING``, ``FORBIDDEN``,
        ``SUBMITTING``, ``LIVE`` (with ``expired_before_ms``) or ``ISSUED`` (with
        ``held_only``: release only a reservation still held in an inbox). With
        ``declined_ms`` (a decline, at that time) the release is noted in ``declining``
        in the same step (:mod:`labelq.live.decline`). ``keep_decision``: a held
        reservation of an ordinary task taken back for another worker leaves its worker
        owed an ordinary-task decision (:func:`.keys.owed_field`)."""
        keys = [k.lease(assignment_id), k.leases, k.reserved, k.wcount, k.reserved_cost,
                k.pending, k.parked, k.nissued, k.declining]
        args = [assignment_id, "" if worker is None else worker,
                "" if expired_before_ms is None else expired_before_ms,
                "1" if allow_submitting else "0", k.prefix, "1" if held_only else "0",
                "" if declined_ms is None else declined_ms, "1" if keep_decision else "0"]
        out = self._run(self._release, keys, args, pipeline)
        return None if pipeline is not None else self.release_result(out)

    def decline_done(self, k: Keys, assignment_id: str, entry: str) -> bool:
        """``DECLINE_DONE``: True if this call handed the decline to the applier."""
        return int(self._decline_done(keys=[k.declining, k.declines],
                                      args=[assignment_id, entry])) == 1

    @staticmethod
    def release_result(out: Any) -> Release:
        if int(out[0]) == 1:
            return Released(int(out[1]), int(out[2]), bool(int(out[3])),
                            int(out[4]) if out[4] not in (b"", "") else None,
                            text(out[5]) == "1", int(out[6]))
        return Refusal(text(out[1]))


_RESERVED = Reserved()
