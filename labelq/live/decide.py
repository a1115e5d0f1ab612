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
The inbox refill (:mod:`.refill`) uses the same :func:`choose` and :func:`reserve_for`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import BudgetExhausted
from .goldplan import gold_plan
from .hotstate import Hot
from .redis.keys import (
    Keys,
    agreement_fields,
    gold_category_field,
    gold_issued_field,
    gold_record_fields,
    owed_field,
)
from .redis.scripts import Refusal, Reserved, Scripts
from .tuning import TUNING, Tuning

__all__ = ["WorkerInfo", "Decision", "decide", "decision_rng", "InboxNotEmpty", "choose",
           "reserve_for", "as_tasks", "assignment_id"]


def decision_rng(seed: int | None, offset: int = 0) -> np.random.Generator:
    """The decisions' generator: seeded by ``Settings.decision_seed`` (tests make decisions
    reproducible with ``LABELQ_DECISION_SEED``) and ``offset`` (one stream per role)."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([int(seed), int(offset)])


@dataclass(frozen=True)
class WorkerInfo:
    seq: int
    cost: float
    capacity: int | None
    categories: tuple[str, ...] = ()

    @classmethod
    def of(cls, worker: Any) -> WorkerInfo:
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


def as_tasks(raw: list[int]) -> np.ndarray:
    """Task seqs as the int64 array the policies take."""
    return np.array(raw, dtype=np.int64)


def choose(hot: Hot, worker: WorkerInfo, cand: np.ndarray, rng: np.random.Generator,
           rng_lock: threading.Lock) -> int | None:
    """The policy's choice for ``worker`` among ``cand`` (the worker's categories only)."""
    mask = np.ones(cand.size, dtype=bool)
    if worker.categories:
        allowed = [i for i, c in enumerate(hot.view.categories) if c in worker.categories]
        mask &= np.isin(hot.view.task_category[cand], allowed)
    if not mask.any():
        return None
    with hot.lock, rng_lock:
        task = hot.policy.select_task(hot.state, worker.seq, cand, mask, rng)
    return None if task is None else int(task)


def assignment_id(hot: Hot, worker: int, task: int, now: int) -> str:
    """The id of ``task`` issued to ``worker`` (seq) at ``now``, signed for ``hot``'s
    database (:class:`.leaseid.IdSigner`)."""
    if hot.signer is None:
        raise RuntimeError("a Hot made without its database's signer")
    return hot.signer.new(hot.project_id, worker, task, now)


def reserve_for(scripts: Scripts, k: Keys, hot: Hot, worker: WorkerInfo, task: int,
                assignment_id: str, expires_ms: int, key_ttl_ms: int, *, inbox: bool,
                pipeline: Any = None, row: str | None = None,
                expect_issued: tuple[int, int] | None = None, empty_inbox: bool = False,
                max_open: int | None = None, now_ms: int | None = None) -> Reserved | None:
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


def decide(redis: Any, scripts: Scripts, hot: Hot, worker: WorkerInfo, now: int, *,
           rng: np.random.Generator, rng_lock: threading.Lock | None = None,
           lease_ms: int, key_ttl_ms: int, inbox: bool = False, check_budget: bool = True,
           max_open: int | None = None, tuning: Tuning = TUNING,
           row_of: Callable[[int], str | None] | None = None) -> Decision | None:
    """Reserve the worker's next task; ``None`` when there is nothing for them now.
    Raises :class:`BudgetExhausted` when the budget cannot pay for this worker's next label
    (only with ``check_budget``). With ``inbox`` the reservation is held for
    ``tuning.hold_ms`` and
    appended to the worker's inbox; else the lease runs ``lease_ms`` from ``now``, and
    :class:`InboxNotEmpty` is raised if the worker's inbox was refilled meanwhile (checked
    atomically by ``RESERVE``): the reservations there were decided first — on the gold
    schedule's earlier counts — and must reach the worker first. ``max_open`` (decisions
    made at once): :class:`InboxNotEmpty` too when the worker holds that many open
    assignments already (another request of theirs issued one meanwhile); the pop that
    follows hands out the oldest of them. ``row_of`` (inbox reservations): the task's JSON
    row, kept in the reservation so that ``POP_INBOX`` hands it out without a SQL read."""
    lock = rng_lock or threading.Lock()
    top_k, max_scan, enough = tuning.top_k, tuning.max_scan, tuning.enough
    settled_scan, retries = tuning.settled_scan, tuning.retries
    project = hot.project
    k = hot.keys
    budget = project.budget
    if budget is not None and check_budget:
        spent = float(redis.get(k.spent) or 0)
        if spent + worker.cost > budget + 1e-9:
            raise BudgetExhausted(f"project {project.name!r} has no budget left",
                                  project=project.name)
    expires = now + (tuning.hold_ms if inbox else lease_ms)
    # with a gold schedule, the worker's counts the schedule was asked with: RESERVE
    # refuses ('stale') if another decision for this worker (the applier refilling the
    # inbox, a request deciding at once) moved them meanwhile, and the decision is redone
    expect: list[tuple[int, int] | None] = [None]

    def reserve(task: int) -> str | Refusal:
        aid = assignment_id(hot, worker.seq, task, now)
        res = reserve_for(scripts, k, hot, worker, task, aid, expires, key_ttl_ms,
                          inbox=inbox, expect_issued=expect[0], empty_inbox=not inbox,
                          max_open=None if inbox else max_open, now_ms=now,
                          row=None if row_of is None else row_of(task))
        assert res is not None  # (not pipelined)
        if res.refusal is Refusal.STALE:
            raise _Stale()
        if res.refusal in (Refusal.INBOX, Refusal.OPEN):
            raise InboxNotEmpty()
        return aid if res.refusal is None else res.refusal

    def attempt(cand: np.ndarray) -> Decision | None | Literal[False]:
        for _ in range(retries):
            if cand.size == 0:
                return False
            task = choose(hot, worker, cand, rng, lock)
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
                worker.seq, gold_issued_field(worker.seq), *gold_record_fields(worker.seq),
                *agreement_fields(worker.seq), owed_field(worker.seq),
                *(gold_category_field(worker.seq, c) for c in range(n_cat))])
            issued = expect[0] = (int(counts[0] or 0), int(counts[1] or 0))
            # a decision owed (a held ordinary reservation of this worker's was reclaimed)
            # is an ordinary task again, with no gold draw (keys.owed_field)
            if int(counts[6] or 0) > 0:
                allowed = None
            else:
                with lock:
                    allowed = gold_plan(
                        project.gold_schedule, issued[0], issued[1],
                        [int(c or 0) for c in counts[7:]], rng,
                        gold_record=(int(counts[2] or 0), int(counts[3] or 0)),
                        agreement=(float(counts[4] or 0), float(counts[5] or 0)))
            if allowed is not None:
                drawn = redis.srandmember(k.gold, tuning.gold_sample) or []
                gold = np.array(sorted(int(t) for t in drawn), dtype=np.int64)
                if gold.size and not allowed.all():
                    gold = gold[allowed[hot.view.task_category[gold]]]
                if gold.size:
                    window = scripts.candidates(k, worker.seq, tasks=gold)
                    assert window is not None  # (not pipelined)
                    got = attempt(as_tasks(window.eligible))
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
        # The walk runs in Redis (CANDIDATES_SCAN: one round trip up to the first window
        # with settled candidates); if none of those can be had, it goes on from there.
        fallback: list[int] | None = None
        offset, size, jumped, scanned = 0, top_k, False, 0
        while True:
            scan = scripts.candidates_scan(k, worker.seq, cap=project.max_labels,
                                           offset=offset, size=size, enough=enough,
                                           max_scan=max_scan, settled_scan=settled_scan,
                                           jumped=jumped, scanned=scanned,
                                           has_fallback=fallback is not None)
            if scan.fallback and fallback is None:
                fallback = scan.fallback
            if scan.settled:
                got = attempt(as_tasks(scan.settled))
                if got is not False:
                    return got
            if scan.done:
                break
            offset, size, jumped, scanned = scan.offset, scan.size, scan.jumped, scan.scanned
        if fallback is not None:
            got = attempt(as_tasks(fallback))
            if got is not False:
                return got
        return None

    for _ in range(retries):
        try:
            return once()
        except _Stale:
            continue
    return None
