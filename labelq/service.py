"""Service operations of the live pipeline: next assignment, submit, decline.

Used by the CLI (``labelq next/submit/decline``) and the HTTP API. Redis holds the
hot state (:mod:`labelq.live`), SQL the record. The ordering that makes crashes safe:

* **next**: the ``POP_INBOX`` script pops the worker's inbox — reservations the applier made
  ahead of time with the policy (:func:`labelq.live.decide.refill_inboxes`) — and starts
  the lease at pop time: one Redis round trip, then the task row from SQL. When the inbox is
  empty the decision is made at once in the calling process (:func:`labelq.live.decide.
  decide`, policy state cached in-process, at most ``state_max_age`` seconds behind SQL;
  the ``pending`` priorities are fresher) and reserved by the ``RESERVE`` script, which
  re-checks every limit atomically. A lost race just retries with the next choice.
* **submit**: ``SUBMIT_BEGIN`` validates the lease and marks it ``submitting`` (so the reaper
  leaves it alone); the ``Assignment`` and ``Label`` rows are then committed to SQL — only
  after that commit does the annotator get an OK; then ``SUBMIT_FINISH`` moves the
  reservation to "done" exactly once and, in the same script, sets the ``apply_wanted``
  flag; only the submitter that set it enqueues the applier (one Celery task drains many
  labels). A crash before the commit
  loses nothing the annotator was told was saved; a crash after it leaves a ``submitting``
  lease that the reaper finishes after checking SQL for the label (:mod:`labelq.live.reaper`).
* **duplicates**: a second submission of an assignment that already has a label returns the
  same result with ``"duplicate": true`` when it is the same worker and the same value
  (idempotent retry), and raises :class:`DuplicateSubmission` when the value differs.

The applier is woken through ``notify(project_id)`` (the CLI wires it to the Celery task
``apply_labels``); this module never imports Celery.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from sqlalchemy import bindparam, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from .db import session_scope
from .errors import (BudgetExhausted, Conflict, DuplicateSubmission, Forbidden, InputError,
                     LeaseExpired, NotFound, ServiceUnavailable)
from .models import Assignment, Label, Project, Task, Worker, utc_from_ms
from .projects import get_worker
from .live.group import Group
from .live.decide import HOLD_MS, InboxNotEmpty, WorkerInfo, decide, decision_rng
from .live.hotstate import Hot, StateCache
from .live.redis.keys import Keys, decline_entry
from .live.applier import WANTED_TTL_MS
from .live.reaper import lease_key_ttl_ms, record_expired
from .live.rebuild import ensure_hot
from .live.redis.scripts import (Began, Finished, Inbox, Popped, Refusal, Released,
                                  Scripts)
from .live.redis.wire import text
from .settings import Settings, load_settings

__all__ = ["Service", "Issued", "UNAVAILABLE", "unavailable"]


@dataclass(frozen=True)
class Issued:
    assignment_id: str
    task: str  # external id
    task_seq: int
    category: str
    payload: dict
    expires_ms: int

    def to_dict(self) -> dict[str, Any]:
        """What the annotator is shown (``labelq next``), as the API's assignment: no task
        id or seq, which would tell a gold question from a task."""
        return {"assignment_id": self.assignment_id, "category": self.category,
                "payload": self.payload, "expires_ms": self.expires_ms,
                "expires_at": utc_from_ms(self.expires_ms).isoformat()}


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
        self._rng = rng or decision_rng()
        self._rng_lock = threading.Lock()
        self.worker_max_age = worker_max_age
        self._workers: dict[str, tuple[float, Worker]] = {}
        self._projects: dict[int, tuple[float, Project]] = {}
        self._submits = Group(self._submit_begin, self._submit_commit,
                             self._submit_finish)
        self._inserts = _Inserts.of(engine)

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

    def _project(self, project_id: int) -> Project:
        """The project row, cached like the worker rows (its label set and cap)."""
        hit = self._projects.get(project_id)
        if hit is not None and time.monotonic() - hit[0] < self.worker_max_age:
            return hit[1]
        with session_scope(self.engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                raise NotFound(f"no project with id {project_id}", project_id=project_id)
            session.expunge(project)
        self._projects[project_id] = (time.monotonic(), project)
        return project

    def _hot(self, worker: Worker, ensure: bool = True) -> Hot:
        if ensure and ensure_hot(self.engine, self.redis, worker.project_id, self.cache):
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
        with self.engine.connect() as conn:
            return tuple(conn.execute(_TASK_ROW, {"p": project_id, "s": int(task)}).one())

    @staticmethod
    def _issued(aid: str, task: int, row: tuple, expires: int) -> Issued:
        return Issued(aid, row[0], int(task), row[1], dict(row[2] or {}), int(expires))

    # --- next ----------------------------------------------------------------------------
    def next_assignment(self, handle: str) -> Issued | None:
        """The worker's next assignment, or ``None`` when there is nothing for them."""
        worker = self._worker(handle)
        if worker.status != "active":
            raise Forbidden(f"worker {handle!r} is {worker.status}", worker=handle)
        return self._next(worker)

    def idle_reason(self, handle: str) -> str:
        """Why :meth:`next_assignment` has nothing for the worker, in words for them: at
        capacity (with open assignments still to finish, or not), the budget spent, or what
        is left of it all held by open assignments, else nothing right now. A Redis read or
        two; call it only when there was nothing."""
        worker = self._worker(handle)
        if worker.status != "active":
            return f"you are {worker.status}: no new assignments until the operator resumes you"
        used = self._at_capacity(worker)
        if used is not None:
            with session_scope(self.engine) as session:
                labels = session.exec(select(func.count(Label.id))
                                      .where(Label.worker_id == worker.id)).one()
            held = used - int(labels)
            if held > 0:
                return (f"you are at your capacity of {worker.capacity}: finish or "
                        f"decline your {held} open assignment(s) first")
            return f"you have reached your capacity of {worker.capacity} labels"
        budget = self._project(worker.project_id).budget
        if budget is not None:
            k = Keys(worker.project_id)
            spent, held = self.redis.mget(k.spent, k.reserved_cost)
            if float(spent or 0) + worker.cost > budget + 1e-9:
                return "the project's budget is spent: there is no more work in it"
            if float(spent or 0) + float(held or 0) + worker.cost > budget + 1e-9:
                return ("the rest of the project's budget is held by open assignments; "
                        "try again later (it frees up if they are declined or expire)")
        return ("no task for you right now (all done, or waiting for other labels); "
                "try again later")

    def _at_capacity(self, worker: Worker) -> int | None:
        """The worker's labels + live leases if that reaches their capacity, else None."""
        if worker.capacity is None:
            return None
        used = self.redis.hget(Keys(worker.project_id).wcount, worker.seq)
        return int(used) if used is not None and int(used) >= worker.capacity else None

    def _next(self, worker: Worker, popped: tuple | None = None) -> Issued | None:
        """``popped``: ``(now, POP_INBOX's answer)`` of a pop already made (pipelined with
        a submit), used instead of the first pop."""
        k = Keys(worker.project_id)
        lease_ms = self.settings.lease_seconds * 1000
        reclaimed = False
        # the inbox first; if it is empty, decide at once — unless the applier refilled the
        # inbox meanwhile (RESERVE refuses then), in which case its reservations come first
        for _ in range(8):
            if popped is None:
                now = now_ms()
                got = self.scripts.pop_inbox(k, worker.seq, now, lease_ms, self._key_ttl_ms(),
                                             max_open=self.settings.max_open)
            else:
                (now, got), popped = popped, None
            if isinstance(got, Popped):
                row = got.row
                if row is None:  # a reservation made without the row: read it from SQL
                    row = self._task_row(worker.project_id, got.task)
                return self._issued(got.assignment_id, got.task, row, got.expires_ms)
            # POP_INBOX said whether the hot state exists; rebuild it if not
            hot = self._hot(worker, ensure=got is Inbox.UNBUILT)
            if got is Inbox.UNBUILT:
                self.redis.zadd(k.active, {worker.seq: now})
            try:
                issued = self._decide(hot, worker, now)
            except InboxNotEmpty:
                continue
            # nothing to decide on may also mean the applier just put the last open tasks
            # in this worker's inbox (they are in its `seen` set now): pop them
            if issued is None and self.redis.llen(k.inbox(worker.seq)):
                continue
            # or that the open tasks sit in other workers' inboxes, held for them but not
            # taken: take one back (once) and decide again
            if issued is None and not reclaimed and self._reclaim(hot, worker, now):
                reclaimed = True
                continue
            return issued
        return None

    def _reclaim(self, hot: Hot, worker: Worker, now: int) -> bool:
        """Return to the pool one reservation held in another worker's inbox that this
        worker could take (not gold — those follow each worker's own schedule —, a task
        it has not seen, of a category it works on), from the worker holding the most,
        the one it would reach last. Near a project's end the applier's inboxes can hold
        every open task for up to ``HOLD_MS`` (renewed while their workers stay active),
        leaving the others with nothing; a reservation is only a guess of what its worker
        will want next, so one who asks now has the better claim. ``RELEASE`` refuses a
        reservation its worker took meanwhile. True if one was released."""
        if self._at_capacity(worker) is not None:
            return False
        k = Keys(worker.project_id)
        ids = self.redis.zrangebyscore(k.leases, now, now + HOLD_MS, start=0,
                                       num=RECLAIM_SCAN)
        if not ids:
            return False
        pipe = self.redis.pipeline(transaction=False)
        for aid in ids:
            pipe.hmget(k.lease(text(aid)), "task", "worker", "held", "gold")
        held = [(text(aid), int(t), int(w)) for aid, (t, w, h, g) in zip(ids, pipe.execute())
                if t is not None and h is not None and text(g) != "1" and int(w) != worker.seq]
        if not held:
            return False
        tasks = np.array([t for _, t, _ in held], dtype=np.int64)
        ok = ~np.array(self.redis.smismember(k.seen(worker.seq), tasks.tolist()), dtype=bool)
        if worker.categories:
            allowed = [i for i, c in enumerate(hot.view.categories) if c in worker.categories]
            ok &= np.isin(hot.view.task_category[tasks], allowed)
        held = [h for h, good in zip(held, ok) if good]
        per_owner: dict[int, int] = {}
        for _, _, w in held:
            per_owner[w] = per_owner.get(w, 0) + 1
        # the biggest holder first; within a holder the latest expiry (the inbox's tail)
        order = sorted(range(len(held)), key=lambda i: (-per_owner[held[i][2]], -i))
        for i in order[:4]:
            if isinstance(self.scripts.release(k, held[i][0], held_only=True), Released):
                return True
        return False

    def _key_ttl_ms(self) -> int:
        return lease_key_ttl_ms(self.settings.lease_seconds * 1000)

    def _decide(self, hot: Hot, worker: Worker, now: int) -> Issued | None:
        d = decide(self.redis, self.scripts, hot, WorkerInfo.of(worker), now, rng=self._rng,
                   rng_lock=self._rng_lock, lease_ms=self.settings.lease_seconds * 1000,
                   key_ttl_ms=self._key_ttl_ms(), top_k=self.top_k, max_scan=self.max_scan,
                   max_open=self.settings.max_open)
        if d is None:
            return None
        return self._issued(d.assignment_id, d.task, self._task_row(hot.project.id, d.task),
                            d.expires_ms)

    # --- submit --------------------------------------------------------------------------
    def submit(self, handle: str, assignment_id: str, value: str, *,
               then_next: bool = False) -> dict[str, Any]:
        """Record the label; returns only once it is committed to SQL. Concurrent submits of
        this process's threads share one batch (group commit): one Redis pipeline for their
        ``SUBMIT_BEGIN``, one SQL transaction, one pipeline for their ``SUBMIT_FINISH`` —
        three stages, each overlapping the neighbouring batches' other stages.

        ``then_next``: also issue the worker's next assignment, as :meth:`next_assignment`
        would, under ``"next"`` (an :class:`Issued`, or ``None`` when there is nothing for
        them or they are paused); its inbox pop rides in the ``SUBMIT_FINISH`` pipeline, so
        an annotator's submit-and-continue costs one request and no extra round trip. The
        label is recorded first: an error there raises as without ``then_next``; after it,
        an exhausted budget is ``"next": None`` (:meth:`idle_reason` says why), not an
        error that would hide the recorded label."""
        worker = self._worker(handle)
        project = self._project(worker.project_id)
        if value not in project.labels:
            raise InputError(f"label {value!r} is not in the label set {project.labels}",
                             label=value)
        then_next = then_next and worker.status == "active"
        kind, began = self._submits.call((worker, project, assignment_id, value, then_next))
        if kind == "done":
            out = {"assignment_id": assignment_id, "label": value, "duplicate": False}
            popped = began
        else:
            out, popped = self._submit_alone(worker, project, assignment_id, value, began), None
        if then_next:
            try:
                out["next"] = self._next(worker, popped)
            except BudgetExhausted:
                # the label is recorded (and its answer must say so): the budget that ran out
                # is a reason for no next assignment, as capacity and a pause are
                out["next"] = None
            except UNAVAILABLE as exc:
                raise unavailable(exc, recorded=True) from exc
        return out

    def _submit_alone(self, worker: Worker, project: Project, assignment_id: str,
                      value: str, began) -> dict[str, Any]:
        """A submit the batch could not finish: refused by ``SUBMIT_BEGIN`` (a retry? an
        error), or in a transaction that hit a constraint (retried alone)."""
        handle = worker.handle
        k = Keys(project.id)
        if isinstance(began, Refusal):
            done = self._existing(worker, assignment_id, value)  # a retried submission?
            if done is not None:
                return self._finish_one(project, assignment_id, done)
        if began is Refusal.MISSING:
            raise NotFound(f"no live assignment {assignment_id!r} (never issued, or expired "
                           "and returned to the pool)", assignment=assignment_id)
        if began is Refusal.FORBIDDEN:
            raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                            assignment=assignment_id, worker=handle)
        if began is Refusal.EXPIRED:
            res = self.scripts.release(k, assignment_id, expired_before_ms=now_ms())
            if isinstance(res, Released):
                record_expired(self.engine, project.id, [(assignment_id, res)],
                               lease_ms=self.settings.lease_seconds * 1000)
            raise LeaseExpired(f"assignment {assignment_id!r} expired",
                               assignment=assignment_id)
        # the batch's transaction failed on a constraint: this label alone, as before
        assert isinstance(began, Began)
        try:
            with self.engine.begin() as conn:
                self._insert(conn, [(worker, project, assignment_id, value, began.gold,
                                     _task_id(conn, project.id, began.task, began.task_id))],
                             now_ms())
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=None) from exc
        except IntegrityError:
            done = self._existing(worker, assignment_id, value)
            if done is not None:
                return self._finish_one(project, assignment_id, done)
            if self._expired(assignment_id):  # stalled past the reaper's grace
                raise LeaseExpired(f"assignment {assignment_id!r} expired while its label "
                                   "was being saved", assignment=assignment_id) from None
            raise
        return self._finish_one(project, assignment_id, {
            "assignment_id": assignment_id, "label": value, "duplicate": False})

    def _finish_one(self, project: Project, assignment_id: str,
                    done: dict[str, Any]) -> dict[str, Any]:
        """``SUBMIT_FINISH`` of one label SQL holds: committed alone, or a retried
        submission (a duplicate), whose reservation is finished in Redis too if nobody did
        — the first attempt may have died between its commit and its ``SUBMIT_FINISH`` (an API process killed, Redis down), and the hot state would
        stay one label short until the reaper's grace ran out. ``SUBMIT_FINISH`` is
        idempotent (the lease hash is the token): after a finished first attempt, this
        does nothing."""
        try:
            finished = self.scripts.submit_finish(Keys(project.id), assignment_id,
                                                  project.max_labels,
                                                  wake_ttl_ms=WANTED_TTL_MS)
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=True) from exc
        if finished is Finished.WAKE and self.notify:
            self.notify(project.id)
        return done

    def _insert(self, conn, rows, now: int) -> None:
        """INSERT the ``Assignment`` and ``Label`` rows of ``(worker, project, aid, value,
        is_gold, task_id)`` tuples: one statement each, whatever their number."""
        self._inserts.run(conn, rows, utc_from_ms(now))

    # the submit batch's three stages (group commit, :mod:`labelq.live.group`): each
    # item's result is ``("done", popped)`` once its label is committed and finished, else
    # ``(kind, began)`` for the caller to finish alone — ``"begin"`` when ``SUBMIT_BEGIN``
    # refused it, ``"single"`` when the shared transaction hit a constraint (a duplicate
    # somewhere in the batch) and nothing of it was committed
    def _submit_begin(self, batch: list) -> None:
        """Stage 1: one pipeline of ``SUBMIT_BEGIN`` (validates and marks the leases)."""
        now = now_ms()
        pipe = self.scripts.pipeline()
        for it in batch:
            worker, project, aid, _value, _next = it.args
            self.scripts.submit_begin(Keys(project.id), aid, worker.seq, now, pipeline=pipe)
        try:
            outs = pipe.execute()
        except UNAVAILABLE as exc:
            _fail(batch, unavailable(exc, recorded=False))
            return
        for it, out in zip(batch, outs):
            b = self.scripts.begin_result(out)
            if isinstance(b, Began):
                it.state = b
            else:
                it.result = ("begin", b)

    def _submit_commit(self, batch: list) -> None:
        """Stage 2: one SQL transaction for the batch's ``Assignment`` and ``Label`` rows."""
        try:
            with self.engine.begin() as conn:
                rows = []
                for it in batch:
                    worker, project, aid, value, _next = it.args
                    b = it.state
                    rows.append((worker, project, aid, value, b.gold,
                                 _task_id(conn, project.id, b.task, b.task_id)))
                self._insert(conn, rows, now_ms())
        except IntegrityError:
            for it in batch:
                it.result = ("single", it.state)
        except UNAVAILABLE as exc:  # lost during the commit: it may have happened
            _fail(batch, unavailable(exc, recorded=None))

    def _submit_finish(self, batch: list) -> None:
        """Stage 3: one pipeline of ``SUBMIT_FINISH`` (and the inbox pops of the submits
        that asked for their next assignment); wakes the applier where a finish asked."""
        try:
            self._finish_batch(batch)
        except UNAVAILABLE as exc:  # the labels are committed: a retry finishes them
            _fail(batch, unavailable(exc, recorded=True))

    def _finish_batch(self, batch: list) -> None:
        pipe = self.scripts.pipeline()
        for it in batch:
            worker, project, aid, _value, _next = it.args
            self.scripts.submit_finish(Keys(project.id), aid, project.max_labels,
                                       pipeline=pipe, wake_ttl_ms=WANTED_TTL_MS)
        # the next assignments asked for with these submits: their inbox pops, same trip
        lease_ms, key_ttl_ms = self.settings.lease_seconds * 1000, self._key_ttl_ms()
        now = now_ms()
        nexts = [it for it in batch if it.args[4]]
        for it in nexts:
            worker = it.args[0]
            self.scripts.pop_inbox(Keys(worker.project_id), worker.seq, now, lease_ms,
                                   key_ttl_ms, pipeline=pipe, max_open=self.settings.max_open)
        replies = pipe.execute()
        woke = {it.args[1].id for it, out in zip(batch, replies)
                if self.scripts.finish_result(out) is Finished.WAKE}
        for it in batch:
            it.result = ("done", None)
        for it, out in zip(nexts, replies[len(batch):]):
            it.result = ("done", (now, self.scripts.pop_result(out)))
        if self.notify:
            for project_id in woke:
                self.notify(project_id)

    def _expired(self, aid: str) -> bool:
        """Whether the record holds the assignment as expired (the reaper released it)."""
        with self.engine.connect() as conn:
            return conn.execute(select(Assignment.state).where(Assignment.id == aid)
                                ).scalar() == "expired"

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
        if not isinstance(res, Released):
            if res is Refusal.FORBIDDEN:
                raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                                assignment=assignment_id, worker=handle)
            if res is Refusal.SUBMITTING:
                raise Conflict(f"assignment {assignment_id!r} is being submitted",
                               assignment=assignment_id)
            raise NotFound(f"no live assignment {assignment_id!r}", assignment=assignment_id)
        task, wseq = res.task, res.worker
        with session_scope(self.engine) as session:
            row = session.exec(select(Task.id, Task.is_gold).where(
                Task.project_id == worker.project_id, Task.seq == task)).one()
            session.add(Assignment(id=assignment_id, project_id=worker.project_id,
                                   task_id=row[0], worker_id=worker.id, is_gold=row[1],
                                   state="declined", expires=utc_from_ms(now_ms())))
        self.redis.rpush(k.declines, decline_entry(task, wseq))
        self._wake_applier(worker.project_id)
        return {"assignment_id": assignment_id, "declined": True}


class _Inserts:
    """The submit path's two INSERTs, sent to the driver as plain SQL with positional
    parameters (``exec_driver_sql``; the record is SQLite or PostgreSQL): SQLAlchemy Core's
    per-statement work — compiled-cache lookup, parameter dicts, bind processing per row —
    cost about a fifth of a submit's CPU. The timestamp is converted once per batch with
    the dialect's own bind processor, so the stored values are the ones Core would store
    (tested byte for byte on both databases)."""

    _cache: dict = {}

    def __init__(self, dialect) -> None:
        mark = "?" if dialect.paramstyle == "qmark" else "%s"

        def sql(table, cols):
            return (f"INSERT INTO {table.name} ({', '.join(cols)}) "
                    f"VALUES ({', '.join([mark] * len(cols))})")
        self.assignment = sql(Assignment.__table__, ["id", "project_id", "task_id",
                                                     "worker_id", "is_gold", "state",
                                                     "issued", "expires"])
        self.label = sql(Label.__table__, ["assignment_id", "project_id", "task_id",
                                           "worker_id", "value", "is_gold", "received"])
        received = Label.__table__.c.received.type
        self.when = received.dialect_impl(dialect).bind_processor(dialect)

    @classmethod
    def of(cls, engine) -> "_Inserts":
        key = (engine.dialect.name, engine.dialect.paramstyle)
        got = cls._cache.get(key)
        if got is None:
            got = cls._cache[key] = cls(engine.dialect)
        return got

    def run(self, conn, rows, at) -> None:
        t = self.when(at) if self.when is not None else at
        conn.exec_driver_sql(self.assignment, [
            (aid, p.id, tid, w.id, bool(g), "submitted", t, t)
            for w, p, aid, _v, g, tid in rows])
        conn.exec_driver_sql(self.label, [
            (aid, p.id, tid, w.id, v, bool(g), t) for w, p, aid, v, g, tid in rows])


def _unavailable_errors() -> tuple:
    import redis
    from sqlalchemy.exc import OperationalError
    return (redis.ConnectionError, redis.TimeoutError, OperationalError)


# Redis or the database not answering (the API answers 503; labelq.api.errors handles these)
UNAVAILABLE = _unavailable_errors()

_RECORDED = {
    True: "your label was recorded, but Redis did not answer to finish it; sending it again "
          "is safe (the answer is then a duplicate, and finishes it)",
    False: "your label was not recorded; send it again shortly",
    None: "the database connection was lost while your label was being committed: it may or "
          "may not be recorded; sending it again is safe (a duplicate if it was)",
}


def unavailable(exc: BaseException, *, recorded: bool | None) -> ServiceUnavailable:
    """A submit cut off by an outage, saying whether its label was recorded (``None``:
    unknown) — a client must know whether to send it again, and a retry is always safe."""
    what = "the database" if recorded is None else "Redis or the database"
    err = ServiceUnavailable(f"{what} does not answer ({type(exc).__name__}); "
                             f"{_RECORDED[recorded]}", recorded=recorded, retry_safe=True)
    err.__cause__ = exc  # also when a batch's caller raises it (the server logs the cause)
    return err


def _fail(batch: list, error: BaseException) -> None:
    for it in batch:
        if it.result is None and it.error is None:
            it.error = error


# held reservations looked at when a worker with nothing to do reclaims one
RECLAIM_SCAN = 256

_TASK_ID = select(Task.id).where(Task.project_id == bindparam("p"), Task.seq == bindparam("s"))
_TASK_ROW = (select(Task.external_id, Task.category, Task.payload)
             .where(Task.project_id == bindparam("p"), Task.seq == bindparam("s")))


def _task_id(conn, project_id: int, task: int, task_id: int | None) -> int:
    """The task's SQL id: the one the lease carries, else looked up (older leases)."""
    if task_id is not None:
        return task_id
    return conn.execute(_TASK_ID, {"p": project_id, "s": task}).scalar_one()
