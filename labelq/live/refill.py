"""Inbox refill: the applier tops up each active worker's inbox with held reservations.

Each worker active in the last ``tuning.active_ms`` gets an inbox as deep as what they ask
for in ``tuning.lookahead_s`` (:func:`inbox_depth` of their pace, :class:`PaceMeter`), never
fewer than ``inbox_size`` nor more than ``inbox_max`` entries. Projects without a gold
schedule refill in three round trips for all workers together (:func:`_refill_batch`);
what that leaves, and projects with a gold schedule, go through :func:`.decide.decide` one
reservation at a time (``inbox=True``: held ``tuning.hold_ms``, the lease starts at pop).
Either way the reservation carries the task's row, so that ``POP_INBOX`` hands it out with
no SQL read in the API process.
"""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

import numpy as np
from sqlalchemy import bindparam
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ..errors import BudgetExhausted
from ..record.db import session_scope
from ..record.models import Task, Worker
from .decide import WorkerInfo, as_tasks, assignment_id, choose, decide, reserve_for
from .hotstate import Hot
from .redis.scripts import Refusal, Scripts
from .tuning import TUNING, Tuning

__all__ = ["PaceMeter", "inbox_depth", "refill_inboxes"]


class PaceMeter:
    """Each worker's pace (next-assignment requests per second), from the ``requests``
    counters that ``POP_INBOX`` keeps, sampled at every refill: an exponentially weighted
    mean of the rate between samples. Kept per process (every applier process measures
    over its own refills)."""

    def __init__(self, weight: float = 0.5) -> None:
        self.weight = weight
        self._last: dict[tuple[int, int], tuple[float, int, float]] = {}
        self._lock = threading.Lock()

    def update(self, project_id: int, counts: dict[int, int], t: float) -> dict[int, float]:
        """Record the counters read at time ``t`` (s); returns each worker's pace."""
        out = {}
        with self._lock:
            for w, c in counts.items():
                key = (project_id, w)
                last = self._last.get(key)
                if last is None or c < last[1]:  # first sample, or counters rebuilt
                    self._last[key] = (t, c, 0.0)
                    out[w] = 0.0
                    continue
                t0, c0, rate = last
                if t - t0 >= 0.02:
                    inst = (c - c0) / (t - t0)
                    rate = inst if rate == 0.0 else \
                        self.weight * inst + (1 - self.weight) * rate
                    self._last[key] = (t, c, rate)
                out[w] = rate
        return out


def inbox_depth(pace: float, inbox_size: int, inbox_max: int,
                lookahead_s: float = TUNING.lookahead_s) -> int:
    """How many held reservations a worker's inbox should hold at this ``pace``
    (requests/s): what they ask for in ``lookahead_s``, within [inbox_size, inbox_max] —
    a person labelling every few seconds gets ``inbox_size``, a fast labeller (or a model)
    a deeper inbox, so they rarely find it empty and wait on a decision made at once."""
    hi = max(inbox_size, inbox_max)
    return int(min(hi, max(inbox_size, math.ceil(pace * lookahead_s))))


def refill_inboxes(engine: Engine, redis: Any, scripts: Scripts, hot: Hot, *, inbox_size: int,
                   lease_ms: int, key_ttl_ms: int, rng: np.random.Generator,
                   now: int | None = None, rng_lock: threading.Lock | None = None,
                   inbox_max: int | None = None, pace: PaceMeter | None = None,
                   tuning: Tuning = TUNING) -> int:
    """Top up the inbox of every worker active in the last ``tuning.active_ms`` with held
    reservations, with the policy's decisions on ``hot`` (the applier's freshest state):
    to ``inbox_size``, or to :func:`inbox_depth` of the worker's pace when ``inbox_max``
    is given (the pace measured by ``pace``). Paused workers, workers at capacity and an
    exhausted budget get nothing. Returns the number of reservations made."""
    lock = rng_lock or threading.Lock()
    if inbox_size <= 0:
        return 0
    now = int(time.time() * 1000) if now is None else now
    k = hot.keys
    active = [int(w) for w in redis.zrangebyscore(k.active, now - tuning.active_ms, "+inf")]
    if not active:
        return 0
    pipe = redis.pipeline(transaction=False)
    for w in active:
        pipe.llen(k.inbox(w))
    pipe.hmget(k.requests, active)
    pipe.zcard(k.leases)
    *lengths, requests, outstanding = pipe.execute()
    depth = dict.fromkeys(active, inbox_size)
    if inbox_max is not None:
        paces = (pace or PaceMeter(tuning.pace_weight)).update(hot.project_id, {
            w: int(c or 0) for w, c in zip(active, requests, strict=True)}, time.monotonic())
        depth = {w: inbox_depth(paces[w], inbox_size, inbox_max, tuning.lookahead_s)
                 for w in active}
    want = {w: depth[w] - int(n) for w, n in zip(active, lengths, strict=True) if int(n) < depth[w]}
    if not want:
        return 0
    with session_scope(engine) as session:
        rows = session.exec(select(Worker).where(Worker.project_id == hot.project_id,
                                                 col(Worker.seq).in_(list(want)))).all()
        workers = [WorkerInfo.of(w) for w in rows if w.status == "active"]
    made = 0
    if not hot.project.gold_schedule:
        made, out_of_budget = _refill_batch(engine, redis, scripts, hot, workers, want, now,
                                            rng=rng, rng_lock=lock, key_ttl_ms=key_ttl_ms,
                                            outstanding=int(outstanding), tuning=tuning)
        if out_of_budget:
            return made
    def row_of(task: int) -> str | None:
        """The task's row for its reservation (as :func:`_refill_batch` keeps them)."""
        rows = hot.rows
        if task not in rows:
            if len(rows) >= tuning.rows_kept:
                rows.clear()
            rows.update(_task_rows(engine, hot.project_id, [task]))
        return rows.get(task)
    for worker in workers:
        for _ in range(want[worker.seq]):
            try:
                d = decide(redis, scripts, hot, worker, now, rng=rng, rng_lock=lock,
                           lease_ms=lease_ms, key_ttl_ms=key_ttl_ms, inbox=True,
                           tuning=tuning, row_of=row_of)
            except BudgetExhausted:
                return made
            if d is None:
                break
            made += 1
    return made


def _task_rows(engine: Engine, project_id: int, tasks: list[int]) -> dict[int, str]:
    """task seq -> JSON ``[external id, category, payload]``, in one SELECT: kept in the
    inbox reservation so that handing it out (``POP_INBOX``) reads nothing from SQL."""
    stmt = (sa_select(col(Task.seq), col(Task.external_id), col(Task.category),
                      col(Task.payload))
            .where(col(Task.project_id) == bindparam("p"),
                   col(Task.seq).in_(bindparam("s", expanding=True))))
    with engine.connect() as conn:
        return {int(r[0]): json.dumps([r[1], r[2], r[3] or {}], separators=(",", ":"))
                for r in conn.execute(stmt, {"p": project_id, "s": tasks})}


def _refill_batch(engine: Engine, redis: Any, scripts: Scripts, hot: Hot,
                  workers: list[WorkerInfo], want: dict[int, int], now: int, *,
                  rng: np.random.Generator, rng_lock: threading.Lock, key_ttl_ms: int,
                  outstanding: int = 0, tuning: Tuning = TUNING) -> tuple[int, bool]:
    """The common case of :func:`refill_inboxes` in three Redis round trips for all the
    workers instead of two per reservation: one ``CANDIDATES_MANY`` (the top of
    ``pending`` for every worker at once, each task's counters read once), the policy's
    choices in process, one pipeline of ``RESERVE``. Decides as :func:`decide` would one
    after the other, but from settled candidates only (a task chosen for one worker is no
    longer settled for the next, nor offered to them in this batch). ``want`` is lowered
    by what was reserved; what is left (a lost race, a window with nothing settled) goes
    through :func:`decide`. Projects with a gold schedule do not come here (their schedule
    advances with every reservation).
    Returns (reservations made, whether ``RESERVE`` found the budget exhausted)."""
    project = hot.project
    k = hot.keys
    # every worker reads the same top of ``pending``: look far enough for all of them,
    # past the ``outstanding`` leases and reservations, whose tasks are not settled
    total = sum(want[w.seq] for w in workers)
    count, enough = max(tuning.top_k, 2 * total + outstanding), tuning.enough + total
    found = scripts.candidates_many(k, [w.seq for w in workers], cap=project.max_labels,
                                    count=count, enough=[enough] * len(workers))
    taken: set[int] = set()
    plan: list[tuple[WorkerInfo, int]] = []
    for w, window in zip(workers, found, strict=True):
        settled = window.settled
        # settled candidates only: a worker with none here is left to ``decide``, which
        # looks deeper before it settles for an outstanding task
        cand = as_tasks([t for t in settled if t not in taken])
        for _ in range(want[w.seq]):
            if cand.size == 0:
                break
            task = choose(hot, w, cand, rng, rng_lock)
            if task is None:
                break
            plan.append((w, task))
            taken.add(task)
            cand = cand[cand != task]
    if not plan:
        return 0, False
    expires = now + tuning.hold_ms
    rows = hot.rows
    missing = sorted({t for _, t in plan if t not in rows})
    if missing:
        if len(rows) + len(missing) > tuning.rows_kept:
            rows.clear()
        rows.update(_task_rows(engine, hot.project_id, missing))
    pipe = scripts.pipeline()
    for w, task in plan:
        reserve_for(scripts, k, hot, w, task, assignment_id(hot, w.seq, task, now), expires,
                    key_ttl_ms, inbox=True, pipeline=pipe, row=rows.get(task))
    made = 0
    for (w, _task), out in zip(plan, pipe.execute(), strict=True):
        res = scripts.reserve_result(out)
        if res.ok:
            made += 1
            want[w.seq] -= 1
        elif res.refusal is Refusal.BUDGET:
            return made, True
        elif res.refusal is Refusal.CAPACITY:
            want[w.seq] = 0
    return made, False
