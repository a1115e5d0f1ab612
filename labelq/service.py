"""Service operations of the live pipeline: next assignment, submit, decline.

Used by the CLI (``labelq next/submit/decline``) and, later, the HTTP API. Redis holds the
hot state (:mod:`labelq.queue`), SQL the record. The ordering that makes crashes safe:

* **next**: the decision is made in the calling process (policy state cached in-process,
  at most ``state_max_age`` seconds behind SQL; the ``pending`` priorities are fresher), and
  the chosen pair is reserved by the ``RESERVE`` Lua script, which re-checks every limit
  atomically. A lost race (someone took the last slot) just retries with the next choice.
* **submit**: ``SUBMIT_BEGIN`` validates the lease and marks it ``submitting`` (so the reaper
  leaves it alone); the ``Assignment`` and ``Label`` rows are then committed to SQL — only
  after that commit does the annotator get an OK; then ``SUBMIT_FINISH`` moves the
  reservation to "done" exactly once; then the applier is woken. A crash before the commit
  loses nothing the annotator was told was saved; a crash after it leaves a ``submitting``
  lease that the reaper finishes after checking SQL for the label (:mod:`labelq.queue.reaper`).
* **duplicates**: a second submission of an assignment that already has a label returns the
  same result with ``"duplicate": true`` when it is the same worker and the same value
  (idempotent retry), and raises :class:`DuplicateSubmission` when the value differs.

The applier is woken through ``notify(project_id)`` (the CLI wires it to the Celery task
``apply_labels``); this module never imports Celery.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from .db import session_scope
from .errors import (BudgetExhausted, Conflict, DuplicateSubmission, Forbidden, InputError,
                     LeaseExpired, NotFound)
from .models import Assignment, Label, Task, Worker
from .projects import get_worker
from .queue.goldplan import gold_plan
from .queue.hotstate import Hot, StateCache
from .queue.keys import Keys
from .queue.applier import WANTED_TTL_MS
from .queue.reaper import SUBMIT_GRACE_MS
from .queue.rebuild import ensure_hot
from .queue.scripts import Scripts
from .settings import Settings, load_settings

__all__ = ["Service", "Issued"]


@dataclass(frozen=True)
class Issued:
    assignment_id: str
    task: str  # external id
    task_seq: int
    category: str
    payload: dict
    expires_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def now_ms() -> int:
    return int(time.time() * 1000)


class Service:
    def __init__(self, engine, redis, *, settings: Settings | None = None,
                 notify: Callable[[int], None] | None = None, cache: StateCache | None = None,
                 rng: np.random.Generator | None = None, top_k: int = 64,
                 state_max_age: float = 0.5, max_scan: int = 100_000,
                 worker_max_age: float = 1.0) -> None:
        self.engine, self.redis = engine, redis
        self.settings = settings or load_settings()
        self.notify = notify
        self.cache = cache or StateCache()
        self.scripts = Scripts(redis)
        self.top_k, self.state_max_age, self.max_scan = top_k, state_max_age, max_scan
        self._rng = rng or np.random.default_rng()
        self._rng_lock = threading.Lock()
        self.worker_max_age = worker_max_age
        self._workers: dict[str, tuple[float, Worker]] = {}

    # --- helpers -------------------------------------------------------------------------
    def _worker(self, handle: str) -> Worker:
        """The worker row, cached for ``worker_max_age`` seconds (a pause takes effect
        within that long)."""
        hit = self._workers.get(handle)
        if hit is not None and time.monotonic() - hit[0] < self.worker_max_age:
            return hit[1]
        with session_scope(self.engine) as session:
            worker = get_worker(session, handle)
        self._workers[handle] = (time.monotonic(), worker)
        return worker

    def _hot(self, worker: Worker) -> Hot:
        if ensure_hot(self.engine, self.redis, worker.project_id, self.cache):
            self._wake_applier(worker.project_id)
        hot = self.cache.get(self.engine, self.redis, worker.project_id,
                             max_age=self.state_max_age)
        if worker.seq >= hot.view.n_workers:  # enrolled since the cache was filled
            hot = self.cache.get(self.engine, self.redis, worker.project_id, max_age=0)
        return hot

    def _wake_applier(self, project_id: int) -> None:
        if self.redis.set(Keys(project_id).apply_wanted, 1, nx=True, px=WANTED_TTL_MS) and \
                self.notify:
            self.notify(project_id)

    def _task_row(self, project_id: int, task: int) -> tuple:
        with session_scope(self.engine) as session:
            return tuple(session.exec(
                select(Task.external_id, Task.category, Task.payload, Task.id)
                .where(Task.project_id == project_id, Task.seq == task)).one())

    @staticmethod
    def _issued(aid: str, task: int, row: tuple, expires: int) -> Issued:
        return Issued(aid, row[0], int(task), row[1], dict(row[2] or {}), int(expires))

    # --- next ----------------------------------------------------------------------------
    def next_assignment(self, handle: str) -> Issued | None:
        """The worker's next assignment, or ``None`` when there is nothing for them."""
        worker = self._worker(handle)
        if worker.status != "active":
            raise Forbidden(f"worker {handle!r} is {worker.status}", worker=handle)
        hot = self._hot(worker)
        k = Keys(worker.project_id)
        now = now_ms()
        self.redis.zadd(k.active, {worker.seq: now})
        while (aid := self.redis.lpop(k.inbox(worker.seq))) is not None:
            aid = aid.decode()
            task, w, exp = self.redis.hmget(k.lease(aid), "task", "worker", "expires")
            if task is not None and int(w) == worker.seq and int(exp) > now + 5_000:
                return self._issued(aid, int(task), self._task_row(worker.project_id,
                                                                    int(task)), int(exp))
        return self._decide(hot, worker, now)

    def _decide(self, hot: Hot, worker: Worker, now: int) -> Issued | None:
        project = hot.project
        k = Keys(project.id)
        budget = project.budget
        if budget is not None:
            spent = float(self.redis.get(k.spent) or 0)
            if spent + worker.cost > budget + 1e-9:
                raise BudgetExhausted(f"project {project.name!r} has no budget left",
                                      project=project.name)
        n_cat = max(len(hot.view.categories), 1)
        counts = self.redis.hmget(k.nissued, [worker.seq, f"g{worker.seq}",
                                              *(f"g{worker.seq}:{c}" for c in range(n_cat))])
        with self._rng_lock:
            allowed = gold_plan(project.gold_schedule, int(counts[0] or 0),
                                int(counts[1] or 0), [int(c or 0) for c in counts[2:]],
                                self._rng)
        if allowed is not None:
            gold = np.array(sorted(int(t) for t in self.redis.srandmember(k.gold, 64) or []),
                            dtype=np.int64)
            if gold.size and not allowed.all():
                gold = gold[allowed[hot.view.task_category[gold]]]
            if gold.size:
                got = self._try(hot, worker, gold, now, gold=True)
                if got is not False:
                    return got
        offset, size = 0, self.top_k
        while offset < self.max_scan:
            raw = self.redis.zrevrange(k.pending, offset, offset + size - 1)
            if not raw:
                return None
            got = self._try(hot, worker, np.array([int(t) for t in raw], dtype=np.int64),
                            now, gold=False)
            if got is not False:
                return got
            offset += size
            size *= 4
        return None

    def _try(self, hot: Hot, worker: Worker, candidates: np.ndarray, now: int,
             gold: bool) -> Issued | None | bool:
        """Issue one of ``candidates``: an Issued, None (worker can get nothing now) or
        False (none of these candidates is eligible; look further)."""
        project = hot.project
        k = Keys(project.id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.smismember(k.seen(worker.seq), [int(t) for t in candidates])
        pipe.hmget(k.nlabels, [int(t) for t in candidates])
        pipe.hmget(k.reserved, [int(t) for t in candidates])
        pipe.hmget(k.applied, [int(t) for t in candidates])
        seen, done, live, applied = pipe.execute()
        mask = ~np.array(seen, dtype=bool)
        if not gold and project.max_labels is not None:
            used = np.array([int(a or 0) + int(b or 0) for a, b in zip(done, live)])
            mask &= used < project.max_labels
        if worker.categories:
            allowed = [i for i, c in enumerate(hot.view.categories) if c in worker.categories]
            mask &= np.isin(hot.view.task_category[candidates], allowed)
        if not gold:
            # Among these candidates, prefer the settled ones — no live lease, no label the
            # applier has not folded in yet — whose priority is current. Without this, every
            # request in the window before the applier catches up would get the same task.
            # Only within the window: scanning further for settled tasks made a request
            # 10x slower when many leases are out (bench/pipeline.py).
            outstanding = np.array([int(a or 0) + int(b or 0) - int(c or 0)
                                    for a, b, c in zip(done, live, applied)])
            settled = mask & (outstanding <= 0)
            if settled.any():
                mask = settled
        lease_ms = self.settings.lease_seconds * 1000
        for _attempt in range(8):
            if not mask.any():
                return False
            with hot.lock, self._rng_lock:
                task = hot.policy.select_task(hot.state, worker.seq, candidates, mask,
                                              self._rng)
            if task is None:
                return False
            aid = uuid.uuid4().hex
            expires = now + lease_ms
            row = self._task_row(project.id, int(task))
            res = self.scripts.reserve(
                k, task=int(task), worker=worker.seq, cap=project.max_labels, task_id=row[3],
                capacity=worker.capacity, cost=worker.cost, budget=project.budget,
                assignment_id=aid, expires_ms=expires,
                key_ttl_ms=lease_ms + 2 * SUBMIT_GRACE_MS,
                category=int(hot.view.task_category[int(task)]))
            if res.ok:
                return self._issued(aid, int(task), row, expires)
            if res.reason in ("capacity", "budget"):
                return None
            mask &= candidates != task  # seen or at the cap since we looked: next choice
        return False

    # --- submit --------------------------------------------------------------------------
    def submit(self, handle: str, assignment_id: str, value: str) -> dict[str, Any]:
        worker = self._worker(handle)
        hot = self._hot(worker)
        project = hot.project
        if value not in project.labels:
            raise InputError(f"label {value!r} is not in the label set {project.labels}",
                             label=value)
        k = Keys(project.id)
        began = self.scripts.submit_begin(k, assignment_id, worker.seq, now_ms())
        if began[0] != "ok":
            done = self._existing(worker, assignment_id, value)  # a retried submission?
            if done is not None:
                return done
        if began[0] == "missing":
            raise NotFound(f"no live assignment {assignment_id!r} (never issued, or expired "
                           "and returned to the pool)", assignment=assignment_id)
        if began[0] == "forbidden":
            raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                            assignment=assignment_id, worker=handle)
        if began[0] == "expired":
            self.scripts.release(k, assignment_id, expired_before_ms=now_ms())
            raise LeaseExpired(f"assignment {assignment_id!r} expired",
                               assignment=assignment_id)
        _, task, is_gold, cost, task_id = began
        now = now_ms()
        try:
            with self.engine.begin() as conn:
                if task_id is None:
                    task_id = conn.execute(select(Task.id).where(
                        Task.project_id == project.id, Task.seq == task)).scalar_one()
                conn.execute(insert(Assignment.__table__).values(
                    id=assignment_id, project_id=project.id, task_id=task_id,
                    worker_id=worker.id, is_gold=is_gold, state="submitted",
                    issued=_utc(now), expires=_utc(now)))
                conn.execute(insert(Label.__table__).values(
                    assignment_id=assignment_id, project_id=project.id, task_id=task_id,
                    worker_id=worker.id, value=value, is_gold=is_gold, received=_utc(now)))
        except IntegrityError:
            done = self._existing(worker, assignment_id, value)
            if done is not None:
                return done
            raise
        self.scripts.submit_finish(k, assignment_id, project.max_labels)
        self._wake_applier(project.id)
        return {"assignment_id": assignment_id, "label": value, "duplicate": False}

    def _existing(self, worker: Worker, aid: str, value: str) -> dict[str, Any] | None:
        with session_scope(self.engine) as session:
            row = session.exec(select(Label.worker_id, Label.value)
                               .where(Label.assignment_id == aid)).first()
        if row is None:
            return None
        if row[0] != worker.id:
            raise Forbidden(f"assignment {aid!r} was not issued to {worker.handle!r}",
                            assignment=aid, worker=worker.handle)
        if row[1] != value:
            raise DuplicateSubmission(f"assignment {aid!r} already has the label {row[1]!r}",
                                      assignment=aid)
        return {"assignment_id": aid, "label": value, "duplicate": True}

    # --- decline -------------------------------------------------------------------------
    def decline(self, handle: str, assignment_id: str) -> dict[str, Any]:
        worker = self._worker(handle)
        k = Keys(worker.project_id)
        res = self.scripts.release(k, assignment_id, worker=worker.seq)
        if not res[0]:
            reason = res[1]
            if reason == "forbidden":
                raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                                assignment=assignment_id, worker=handle)
            if reason == "submitting":
                raise Conflict(f"assignment {assignment_id!r} is being submitted",
                               assignment=assignment_id)
            raise NotFound(f"no live assignment {assignment_id!r}", assignment=assignment_id)
        _, task, wseq = res
        with session_scope(self.engine) as session:
            row = session.exec(select(Task.id, Task.is_gold).where(
                Task.project_id == worker.project_id, Task.seq == task)).one()
            session.add(Assignment(id=assignment_id, project_id=worker.project_id,
                                   task_id=row[0], worker_id=worker.id, is_gold=row[1],
                                   state="declined", expires=_utc(now_ms())))
        self.redis.rpush(k.declines, f"{task}:{wseq}")
        self._wake_applier(worker.project_id)
        return {"assignment_id": assignment_id, "declined": True}


def _utc(ms: int):
    from datetime import datetime, timezone
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
