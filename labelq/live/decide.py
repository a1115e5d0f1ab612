"""The policy decision for one worker, shared by the service and the applier.

``decide(...)`` picks the worker's next task with the project's policy and reserves it with
the ``RESERVE`` script (which re-checks every limit atomically). Two callers:

* the service, when the worker's inbox is empty ("decide at once": the annotator does not
  wait for a Celery round trip) — the lease starts now;
* the applier (Celery side), after folding labels in and on the beat, refilling the inbox of
  every recently active worker (``refill_inboxes``) — the reservation is *held* for
  ``HOLD_MS`` and the lease proper starts when the worker pops it (``POP_INBOX``).

Candidates come from the top of ``pending`` (highest priority first) through the
``CANDIDATES`` script, which drops in Redis the tasks the worker has seen and those at the
cap, and marks the *settled* ones (no live lease, no label the applier has not folded in
yet, so their priority is current): a decision prefers settled tasks within the window (the
top ``top_k``, or fewer once ``enough`` settled ones are found — the policy then picks among
those ``enough`` highest-priority settled tasks).
Gold questions are due when the project's gold schedule says so (:mod:`.goldplan`).
"""

from __future__ import annotations

import json
import math
import os
import threading
import uuid
from dataclasses import dataclass

import numpy as np

from ..errors import BudgetExhausted
from .goldplan import gold_plan
from .hotstate import Hot
from .redis.keys import Keys, gold_category_field, gold_issued_field
from .redis.scripts import Refusal, Scripts

__all__ = ["WorkerInfo", "Decision", "decide", "decision_rng", "refill_inboxes", "HOLD_MS",
           "ACTIVE_MS", "InboxNotEmpty", "PaceMeter", "inbox_depth"]

# an inbox reservation nobody popped returns to the pool after this long (the reaper)
HOLD_MS = 30_000


def decision_rng(seed_offset: int = 0) -> np.random.Generator:
    """``LABELQ_DECISION_SEED`` (if set) makes decisions reproducible in tests."""
    seed = os.environ.get("LABELQ_DECISION_SEED")
    if seed is None or seed == "":
        return np.random.default_rng()
    return np.random.default_rng([int(seed), int(seed_offset)])


@dataclass(frozen=True)
class WorkerInfo:
    seq: int
    cost: float
    capacity: int | None
    categories: tuple[str, ...] = ()

    @classmethod
    def of(cls, worker) -> "WorkerInfo":
        return cls(int(worker.seq), float(worker.cost), worker.capacity,
                   tuple(worker.categories or ()))


@dataclass(frozen=True)
class Decision:
    assignment_id: str
    task: int
    expires_ms: int


class _Stale(Exception):
    """The worker's issued counts moved after the gold schedule was asked: decide again."""


class InboxNotEmpty(Exception):
    """A decision made at once found reservations in the worker's inbox (the applier
    refilled it meanwhile), or the worker at their bound of open assignments (another
    request of theirs): the worker must get those first — pop the inbox again."""


def _ints(raw) -> np.ndarray:
    return np.array([int(t) for t in raw], dtype=np.int64)


def _select(hot: Hot, worker: WorkerInfo, cand: np.ndarray, rng, rng_lock) -> int | None:
    mask = np.ones(cand.size, dtype=bool)
    if worker.categories:
        allowed = [i for i, c in enumerate(hot.view.categories) if c in worker.categories]
        mask &= np.isin(hot.view.task_category[cand], allowed)
    if not mask.any():
        return None
    with hot.lock, rng_lock:
        task = hot.policy.select_task(hot.state, worker.seq, cand, mask, rng)
    return None if task is None else int(task)


def _reserve(scripts: Scripts, k: Keys, hot: Hot, worker: WorkerInfo, task: int,
             assignment_id: str, expires_ms: int, key_ttl_ms: int, *, inbox: bool,
             pipeline=None, row: str | None = None,
             expect_issued: tuple[int, int] | None = None, empty_inbox: bool = False,
             max_open: int | None = None, now_ms: int | None = None):
    """``RESERVE`` of ``task`` for ``worker`` under the project's limits; the task's SQL
    id goes into the lease (submit needs no lookup) and its category into the gold counts."""
    ids = hot.view.task_id
    project = hot.project
    return scripts.reserve(
        k, task=task, worker=worker.seq, cap=project.max_labels,
        task_id=None if ids is None else int(ids[task]), capacity=worker.capacity,
        cost=worker.cost, budget=project.budget, assignment_id=assignment_id,
        expires_ms=expires_ms, key_ttl_ms=key_ttl_ms,
        category=int(hot.view.task_category[task]), inbox=inbox, pipeline=pipeline, row=row,
        expect_issued=expect_issued, empty_inbox=empty_inbox, max_open=max_open,
        now_ms=now_ms)


def decide(redis, scripts: Scripts, hot: Hot, worker: WorkerInfo, now: int, *,
           rng: np.random.Generator, rng_lock: threading.Lock | None = None,
           lease_ms: int, key_ttl_ms: int, inbox: bool = False, top_k: int = 64,
           max_scan: int = 100_000, check_budget: bool = True,
           enough: int = 16, settled_scan: int = 1024,
           max_open: int | None = None) -> Decision | None:
    """Reserve the worker's next task; ``None`` when there is nothing for them now.
    Raises :class:`BudgetExhausted` when the budget cannot pay for this worker's next label
    (only with ``check_budget``). With ``inbox`` the reservation is held for ``HOLD_MS`` and
    appended to the worker's inbox; else the lease runs ``lease_ms`` from ``now``, and
    :class:`InboxNotEmpty` is raised if the worker's inbox was refilled meanwhile (checked
    atomically by ``RESERVE``): the reservations there were decided first — on the gold
    schedule's earlier counts — and must reach the worker first. ``max_open`` (decisions
    made at once): :class:`InboxNotEmpty` too when the worker holds that many open
    assignments already (another request of theirs issued one meanwhile); the pop that
    follows hands out the oldest of them."""
    rng_lock = rng_lock or threading.Lock()
    project = hot.project
    k = Keys(project.id)
    budget = project.budget
    if budget is not None and check_budget:
        spent = float(redis.get(k.spent) or 0)
        if spent + worker.cost > budget + 1e-9:
            raise BudgetExhausted(f"project {project.name!r} has no budget left",
                                  project=project.name)
    expires = now + (HOLD_MS if inbox else lease_ms)
    # with a gold schedule, the worker's counts the schedule was asked with: RESERVE
    # refuses ('stale') if another decision for this worker (the applier refilling the
    # inbox, a request deciding at once) moved them meanwhile, and the decision is redone
    expect: list = [None]

    def reserve(task: int) -> str | Refusal:
        aid = uuid.uuid4().hex
        res = _reserve(scripts, k, hot, worker, task, aid, expires, key_ttl_ms, inbox=inbox,
                       expect_issued=expect[0], empty_inbox=not inbox,
                       max_open=None if inbox else max_open, now_ms=now)
        if res.refusal is Refusal.STALE:
            raise _Stale()
        if res.refusal in (Refusal.INBOX, Refusal.OPEN):
            raise InboxNotEmpty()
        return aid if res.refusal is None else res.refusal

    def attempt(cand: np.ndarray) -> Decision | None | bool:
        for _ in range(8):
            if cand.size == 0:
                return False
            task = _select(hot, worker, cand, rng, rng_lock)
            if task is None:
                return False
            got = reserve(task)
            if got in (Refusal.CAPACITY, Refusal.BUDGET):
                return None
            if not isinstance(got, Refusal):
                return Decision(got, task, expires)
            cand = cand[cand != task]  # seen or at the cap since we looked: next choice
        return False

    def once() -> Decision | None:
        if project.gold_schedule:
            n_cat = max(len(hot.view.categories), 1)
            counts = redis.hmget(k.nissued, [
                worker.seq, gold_issued_field(worker.seq),
                *(gold_category_field(worker.seq, c) for c in range(n_cat))])
            expect[0] = (int(counts[0] or 0), int(counts[1] or 0))
            with rng_lock:
                allowed = gold_plan(project.gold_schedule, expect[0][0], expect[0][1],
                                    [int(c or 0) for c in counts[2:]], rng)
            if allowed is not None:
                gold = np.array(sorted(int(t) for t in redis.srandmember(k.gold, 64) or []),
                                dtype=np.int64)
                if gold.size and not allowed.all():
                    gold = gold[allowed[hot.view.task_category[gold]]]
                if gold.size:
                    window = scripts.candidates(k, worker.seq, tasks=gold)
                    got = attempt(_ints(window.eligible))
                    if got is not False:
                        return got
        # prefer a settled candidate (its priority is current); only if none turns up, an
        # eligible one from the first window that had any. The top of pending can be all
        # outstanding — tasks leased or held in inboxes keep their stale, high priority
        # until their labels are applied — and taking one of those gave the same few tasks
        # label after label, up to the cap, while fresh tasks of equal worth waited below
        # the window. So when a window is all outstanding, look next just past as many
        # tasks as there are leases (where the outstanding ones end when their priorities
        # tie), then further down, ``settled_scan`` tasks at most beyond the first window.
        offset, size, fallback, jumped, scanned = 0, top_k, None, False, 0
        while offset < max_scan:
            window = scripts.candidates(k, worker.seq, cap=project.max_labels,
                                        offset=offset, count=size, enough=enough)
            ok, settled, n = window.eligible, window.settled, window.looked
            if n == 0:
                break
            if settled:
                got = attempt(_ints(settled))
                if got is not False:
                    return got
            if ok and fallback is None:
                fallback = ok
            if 0 <= n < size:
                break
            if offset > 0:
                scanned += size
            if fallback is not None and scanned >= settled_scan:
                break
            next_offset = offset + size
            if fallback is not None and not jumped:
                jumped = True
                next_offset = max(next_offset, int(redis.zcard(k.leases)))
            offset, size = next_offset, size * 4
        if fallback is not None:
            got = attempt(_ints(fallback))
            if got is not False:
                return got
        return None

    for _ in range(8):
        try:
            return once()
        except _Stale:
            continue
    return None


# a worker who asked for work this recently gets their inbox refilled
ACTIVE_MS = 60_000
# an inbox holds what its worker asks for in this long (at least ``inbox_size``, at most
# ``inbox_max``): long enough to outlast the applier's refill interval and a batch
LOOKAHEAD_S = 0.5


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


PACE = PaceMeter()


def inbox_depth(pace: float, inbox_size: int, inbox_max: int) -> int:
    """How many held reservations a worker's inbox should hold at this ``pace``
    (requests/s): what they ask for in ``LOOKAHEAD_S``, within [inbox_size, inbox_max] —
    a person labelling every few seconds gets ``inbox_size``, a fast labeller (or a model)
    a deeper inbox, so they rarely find it empty and wait on a decision made at once."""
    hi = max(inbox_size, inbox_max)
    return int(min(hi, max(inbox_size, math.ceil(pace * LOOKAHEAD_S))))


def refill_inboxes(engine, redis, scripts: Scripts, hot: Hot, *, inbox_size: int,
                   lease_ms: int, key_ttl_ms: int, rng: np.random.Generator,
                   now: int | None = None, rng_lock: threading.Lock | None = None,
                   top_k: int = 64, inbox_max: int | None = None,
                   pace: PaceMeter | None = None) -> int:
    """Top up the inbox of every worker active in the last ``ACTIVE_MS`` with held
    reservations, with the policy's decisions on ``hot`` (the applier's freshest state):
    to ``inbox_size``, or to :func:`inbox_depth` of the worker's pace when ``inbox_max``
    is given. Paused workers, workers at capacity and an exhausted budget get nothing.
    Returns the number of reservations made."""
    import time

    from sqlmodel import select

    from ..db import session_scope
    from ..models import Worker

    if inbox_size <= 0:
        return 0
    now = int(time.time() * 1000) if now is None else now
    k = Keys(hot.project.id)
    active = [int(w) for w in redis.zrangebyscore(k.active, now - ACTIVE_MS, "+inf")]
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
        paces = (pace or PACE).update(hot.project.id, {
            w: int(c or 0) for w, c in zip(active, requests)}, time.monotonic())
        depth = {w: inbox_depth(paces[w], inbox_size, inbox_max) for w in active}
    want = {w: depth[w] - int(n) for w, n in zip(active, lengths) if int(n) < depth[w]}
    if not want:
        return 0
    with session_scope(engine) as session:
        rows = session.exec(select(Worker).where(Worker.project_id == hot.project.id,
                                                 Worker.seq.in_(list(want)))).all()
        workers = [WorkerInfo.of(w) for w in rows if w.status == "active"]
    made = 0
    if not hot.project.gold_schedule:
        made, out_of_budget = _refill_batch(engine, redis, scripts, hot, workers, want, now,
                                            rng=rng, rng_lock=rng_lock,
                                            key_ttl_ms=key_ttl_ms, top_k=top_k,
                                            outstanding=int(outstanding))
        if out_of_budget:
            return made
    for worker in workers:
        for _ in range(want[worker.seq]):
            try:
                d = decide(redis, scripts, hot, worker, now, rng=rng, rng_lock=rng_lock,
                           lease_ms=lease_ms, key_ttl_ms=key_ttl_ms, inbox=True,
                           top_k=top_k)
            except BudgetExhausted:
                return made
            if d is None:
                break
            made += 1
    return made


# at most this many task rows kept per project in an applier process (``Hot.rows``)
ROWS_KEPT = 200_000


def _task_rows(engine, project_id: int, tasks: list[int]) -> dict[int, str]:
    """task seq -> JSON ``[external id, category, payload]``, in one SELECT: kept in the
    inbox reservation so that handing it out (``POP_INBOX``) reads nothing from SQL."""
    from sqlalchemy import bindparam, select

    from ..models import Task
    stmt = (select(Task.seq, Task.external_id, Task.category, Task.payload)
            .where(Task.project_id == bindparam("p"),
                   Task.seq.in_(bindparam("s", expanding=True))))
    with engine.connect() as conn:
        return {int(r[0]): json.dumps([r[1], r[2], r[3] or {}], separators=(",", ":"))
                for r in conn.execute(stmt, {"p": project_id, "s": tasks})}


def _refill_batch(engine, redis, scripts: Scripts, hot: Hot, workers: list[WorkerInfo],
                  want: dict[int, int], now: int, *, rng: np.random.Generator,
                  rng_lock: threading.Lock | None, key_ttl_ms: int, top_k: int,
                  enough: int = 16, outstanding: int = 0) -> tuple[int, bool]:
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
    rng_lock = rng_lock or threading.Lock()
    project = hot.project
    k = Keys(project.id)
    # every worker reads the same top of ``pending``: look far enough for all of them,
    # past the ``outstanding`` leases and reservations, whose tasks are not settled
    total = sum(want[w.seq] for w in workers)
    count, enough = max(top_k, 2 * total + outstanding), enough + total
    found = scripts.candidates_many(k, [w.seq for w in workers], cap=project.max_labels,
                                    count=count, enough=[enough] * len(workers))
    taken: set[int] = set()
    plan: list[tuple[WorkerInfo, int]] = []
    for w, window in zip(workers, found):
        settled = window.settled
        # settled candidates only: a worker with none here is left to ``decide``, which
        # looks deeper before it settles for an outstanding task
        cand = np.array([t for t in _ints(settled) if int(t) not in taken], dtype=np.int64)
        for _ in range(want[w.seq]):
            if cand.size == 0:
                break
            task = _select(hot, w, cand, rng, rng_lock)
            if task is None:
                break
            plan.append((w, task))
            taken.add(task)
            cand = cand[cand != task]
    if not plan:
        return 0, False
    expires = now + HOLD_MS
    rows = hot.rows
    missing = sorted({t for _, t in plan if t not in rows})
    if missing:
        if len(rows) + len(missing) > ROWS_KEPT:
            rows.clear()
        rows.update(_task_rows(engine, project.id, missing))
    pipe = scripts.pipeline()
    for w, task in plan:
        _reserve(scripts, k, hot, w, task, uuid.uuid4().hex, expires, key_ttl_ms,
                 inbox=True, pipeline=pipe, row=rows.get(task))
    made = 0
    for (w, _task), out in zip(plan, pipe.execute()):
        res = scripts.reserve_result(out)
        if res.ok:
            made += 1
            want[w.seq] -= 1
        elif res.refusal is Refusal.BUDGET:
            return made, True
        elif res.refusal is Refusal.CAPACITY:
            want[w.seq] = 0
    return made, False
