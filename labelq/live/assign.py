"""Next assignment: pop the worker's inbox, else decide at once, else reclaim.

The ``POP_INBOX`` script pops the worker's inbox — reservations the applier made ahead of
time with the policy (:mod:`.refill`) — and starts the lease at pop time: one Redis round
trip (the task's row rides in the reservation). When the inbox is empty the decision is
made at once in the calling process (:func:`.decide.decide`, policy state cached
in-process, at most ``tuning.state_max_age`` behind SQL) and reserved by ``RESERVE``, which
re-checks every limit atomically; a decision that finds the inbox refilled meanwhile pops
it instead. A worker left with nothing while the open tasks sit in other workers' inboxes
takes one back (:meth:`Assigner._reclaim`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import bindparam, func
from sqlmodel import col, select

from ..record.db import session_scope
from ..record.models import Label, Project, Task, Worker, utc_from_ms
from .context import Live, now_ms
from .decide import InboxNotEmpty, WorkerInfo, decide
from .hotstate import Hot, StateCache
from .rebuild import ensure_hot
from .redis.scripts import Inbox, Pop, Popped, Released
from .redis.wire import text

__all__ = ["Assigner", "Issued", "NOTHING_NOW", "BUDGET_SPENT"]

#: :meth:`Assigner.idle_reason` when the budget left cannot pay this worker's next label
#: (the service says ``finished: ...`` instead when it pays nobody's: the project finished)
BUDGET_SPENT = "the project's budget is spent: there is no more work in it"

#: :meth:`Assigner.idle_reason` when nothing else explains it (the service says instead
#: when the project is finished or stalled: labelq.service.Service.idle_reason)
NOTHING_NOW = ("no task for you right now (all done, or waiting for other labels); "
               "try again later")


@dataclass(frozen=True)
class Issued:
    assignment_id: str
    task: str  # external id
    task_seq: int
    category: str
    payload: dict[str, Any]
    expires_ms: int
    # the model's answer the labeling page shows beside it (a project with
    # ``show_suggestions``; filled by the API, :meth:`labelq.service.Service.suggestion`)
    suggestion: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """What the annotator is shown (``labelq next``), as the API's assignment: no task
        id or seq, which would tell a gold question from a task."""
        return {"assignment_id": self.assignment_id, "category": self.category,
                "payload": self.payload, "expires_ms": self.expires_ms,
                "expires_at": utc_from_ms(self.expires_ms).isoformat()}

    @classmethod
    def of(cls, aid: str, task: int, row: Any, expires: int) -> Issued:
        """From the task's row ``[external id, category, payload]``."""
        return cls(aid, row[0], int(task), row[1], dict(row[2] or {}), int(expires))


_TASK_ROW = (select(Task.external_id, Task.category, Task.payload)
             .where(Task.project_id == bindparam("p"), Task.seq == bindparam("s")))


class Assigner:
    """The next-assignment path of one process (shared by its threads)."""

    def __init__(self, live: Live, cache: StateCache, rng: np.random.Generator) -> None:
        self.live = live
        self.cache = cache
        self.rng = rng
        self.rng_lock = threading.Lock()

    def next(self, worker: Worker, popped: tuple[int, Pop] | None = None) -> Issued | None:
        """The worker's next assignment (the worker is active), or ``None`` when there is
        nothing for them. ``popped``: ``(now, POP_INBOX's answer)`` of a pop already made
        (pipelined with a submit), used instead of the first pop."""
        live = self.live
        k = self.live.keys(worker.project_id)
        reclaimed = False
        # the inbox first; if it is empty, decide at once — unless the applier refilled the
        # inbox meanwhile (RESERVE refuses then), in which case its reservations come first
        for _ in range(live.tuning.retries):
            if popped is None:
                now = now_ms()
                got = live.scripts.pop_inbox(k, worker.seq, now, live.lease_ms,
                                             live.key_ttl_ms,
                                             min_left_ms=live.tuning.min_left_ms,
                                             max_open=live.settings.max_open)
            else:
                (now, got), popped = popped, None
            if isinstance(got, Popped):
                row = got.row
                if row is None:  # a reservation made without the row: read it from SQL
                    return Issued.of(got.assignment_id, got.task,
                                     self.task_row(worker.project_id, got.task), got.expires_ms)
                return Issued.of(got.assignment_id, got.task, row, got.expires_ms)
            # POP_INBOX said whether the hot state exists; rebuild it if not
            hot = self.hot(worker, ensure=got is Inbox.UNBUILT)
            if got is Inbox.UNBUILT:
                live.redis.zadd(k.active, {worker.seq: now})
            try:
                issued = self.decide(hot, worker, now)
            except InboxNotEmpty:
                continue
            # nothing to decide on may also mean the applier just put the last open tasks
            # in this worker's inbox (they are in its `seen` set now): pop them
            if issued is None and live.redis.llen(k.inbox(worker.seq)):
                continue
            # or that the open tasks sit in other workers' inboxes, held for them but not
            # taken: take one back (once) and decide again
            if issued is None and not reclaimed and self._reclaim(hot, worker, now):
                reclaimed = True
                continue
            return issued
        return None

    def hot(self, worker: Worker, ensure: bool = True) -> Hot:
        """The project's cached policy state (the hot state rebuilt first if it has none,
        and the applier woken then: unapplied labels may wait)."""
        live = self.live
        if ensure and ensure_hot(live.engine, live.redis, worker.project_id, self.cache):
            live.wake(worker.project_id)
        hot = self.cache.get(live.engine, live.redis, worker.project_id,
                             max_age=live.tuning.state_max_age,
                             refresh_after=live.tuning.state_max_age
                             * live.tuning.state_refresh_share)
        if worker.seq >= hot.view.n_workers:  # enrolled since the cache was filled
            hot = self.cache.get(live.engine, live.redis, worker.project_id, max_age=0)
        return hot

    def keep_fresh(self, project_id: int) -> None:
        """Catch the cached state of the project up in the background if it is as old as
        a decision would (``StateCache.refresh``): for a path that serves requests without
        it (inbox pops), so a decision made at once later finds it fresh."""
        live = self.live
        self.cache.refresh(live.engine, live.redis, project_id,
                           after=live.tuning.state_max_age * live.tuning.state_refresh_share)

    def decide(self, hot: Hot, worker: Worker, now: int) -> Issued | None:
        """A decision made at once (the inbox was empty), its lease starting now."""
        live = self.live
        d = decide(live.redis, live.scripts, hot, WorkerInfo.of(worker), now, rng=self.rng,
                   rng_lock=self.rng_lock, lease_ms=live.lease_ms,
                   key_ttl_ms=live.key_ttl_ms, max_open=live.settings.max_open,
                   tuning=live.tuning)
        if d is None:
            return None
        return Issued.of(d.assignment_id, d.task, self.task_row(hot.project_id, d.task),
                         d.expires_ms)

    def task_row(self, project_id: int, task: int) -> tuple[Any, ...]:
        with self.live.engine.connect() as conn:
            return tuple(conn.execute(_TASK_ROW, {"p": project_id, "s": int(task)}).one())

    def at_capacity(self, worker: Worker) -> int | None:
        """The worker's labels + live leases if that reaches their capacity, else None."""
        if worker.capacity is None:
            return None
        used = self.live.redis.hget(self.live.keys(worker.project_id).wcount, worker.seq)
        return int(used) if used is not None and int(used) >= worker.capacity else None

    def idle_reason(self, worker: Worker, project: Project) -> str:
        """Why :meth:`next` has nothing for the worker, in words for them: at capacity
        (with open assignments still to finish, or not), the budget spent, or what is left
        of it all held by open assignments, else nothing right now."""
        live = self.live
        if worker.status != "active":
            return f"you are {worker.status}: no new assignments until the operator resumes you"
        used = self.at_capacity(worker)
        if used is not None:
            with session_scope(live.engine) as session:
                labels = session.exec(select(func.count(col(Label.id)))
                                      .where(Label.worker_id == worker.id)).one()
            held = used - int(labels)
            if held > 0:
                return (f"you are at your capacity of {worker.capacity}: finish or "
                        f"decline your {held} open assignment(s) first")
            return f"you have reached your capacity of {worker.capacity} labels"
        budget = project.budget
        if budget is not None:
            k = self.live.keys(worker.project_id)
            spent, held_cost = live.redis.mget(k.spent, k.reserved_cost)
            if float(spent or 0) + worker.cost > budget + 1e-9:
                return BUDGET_SPENT
            if float(spent or 0) + float(held_cost or 0) + worker.cost > budget + 1e-9:
                return ("the rest of the project's budget is held by open assignments; "
                        "try again later (it frees up if they are declined or expire)")
        return NOTHING_NOW

    def _reclaim(self, hot: Hot, worker: Worker, now: int) -> bool:
        """Return to the pool one reservation held in another worker's inbox that this
        worker could take (not gold — those follow each worker's own schedule —, a task
        it has not seen, of a category it works on), from the worker holding the most,
        the one it would reach last. Near a project's end the applier's inboxes can hold
        every open task for up to ``tuning.hold_ms`` (renewed while their workers stay
        active), leaving the others with nothing; a reservation is only a guess of what
        its worker will want next, so one who asks now has the better claim. ``RELEASE``
        refuses a reservation its worker took meanwhile. True if one was released."""
        if self.at_capacity(worker) is not None:
            return False
        live, t = self.live, self.live.tuning
        k = self.live.keys(worker.project_id)
        ids = live.redis.zrangebyscore(k.leases, now, now + t.hold_ms, start=0,
                                       num=t.reclaim_scan)
        if not ids:
            return False
        pipe = live.redis.pipeline(transaction=False)
        for aid in ids:
            pipe.hmget(k.lease(text(aid)), "task", "worker", "held", "gold")
        held = [(text(aid), int(tk), int(w))
                for aid, (tk, w, h, g) in zip(ids, pipe.execute(), strict=True)
                if tk is not None and h is not None and text(g) != "1" and int(w) != worker.seq]
        if not held:
            return False
        tasks = np.array([tk for _, tk, _ in held], dtype=np.int64)
        ok = ~np.array(live.redis.smismember(k.seen(worker.seq), tasks.tolist()), dtype=bool)
        if worker.categories:
            allowed = [i for i, c in enumerate(hot.view.categories) if c in worker.categories]
            ok &= np.isin(hot.view.task_category[tasks], allowed)
        held = [h for h, good in zip(held, ok, strict=True) if good]
        per_owner: dict[int, int] = {}
        for _, _, w in held:
            per_owner[w] = per_owner.get(w, 0) + 1
        # the biggest holder first; within a holder the latest expiry (the inbox's tail)
        order = sorted(range(len(held)), key=lambda i: (-per_owner[held[i][2]], -i))
        for i in order[:t.reclaim_tries]:
            # (with a gold schedule its worker is owed the ordinary-task decision: gold
            # is never reclaimed, so a slot drawn again would tilt their gold rate up)
            if isinstance(live.scripts.release(
                    k, held[i][0], held_only=True,
                    keep_decision=bool(hot.project.gold_schedule)), Released):
                return True
        return False
