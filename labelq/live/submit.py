"""Submit: record a label so that a crash anywhere loses no acknowledged label and counts
nothing twice.

1. ``SUBMIT_BEGIN`` validates the lease and marks it ``submitting`` (the reaper waits);
2. the ``Assignment`` and ``Label`` rows are committed to SQL (raw INSERTs,
   :class:`Inserts`) — only after that commit does the annotator get an OK;
3. ``SUBMIT_FINISH`` moves the reservation to "done" exactly once and, in the same script,
   sets ``apply_wanted``; only the submitter that set it wakes the applier.

The submits of one process's threads share these steps (group commit,
:class:`.group.Group`): one pipeline of ``SUBMIT_BEGIN``, one SQL transaction, one pipeline
of ``SUBMIT_FINISH`` per batch — three stages, each overlapping the neighbouring batches'
other stages. A submit the batch cannot finish (refused by ``SUBMIT_BEGIN``, or in a
transaction that hit a constraint) is finished alone by its caller. A second submission of
a labelled assignment is an idempotent OK (``"duplicate": true``) from the same worker with
the same value, :class:`DuplicateSubmission` with another value. A submit with
``then_next`` pops the worker's inbox in the ``SUBMIT_FINISH`` pipeline and goes on to
:meth:`.assign.Assigner.next`.

A submit is a :class:`SubmitJob` (built by the facade, :class:`labelq.service.Service`,
which checks the label against the label set) and its result a :class:`Submitted`. Threads
call :meth:`Submitter.submit` (the group above); the API's committer thread runs its own
batches (:meth:`Submitter.run_batch`), and the event loop then takes a submit's result at
once when the batch did everything (:meth:`Submitter.settled`), else finishes it in a
thread (:meth:`Submitter.complete`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from ..errors import (
    AssignmentUnknown,
    BudgetExhausted,
    DuplicateSubmission,
    Forbidden,
    LeaseExpired,
    LeaseLost,
    NotFound,
    ServiceUnavailable,
)
from ..record.db import session_scope
from ..record.models import Assignment, Label, Project, Task, Worker, utc_from_ms
from ..record.secret import assignment_key
from ..record.withheld import marked_suggested
from .assign import Assigner, Issued
from .context import Live, now_ms
from .decide import WorkerInfo, reserve_for
from .group import Group, Item
from .leaseid import IdSigner, parse_assignment_id
from .reaper import record_expired
from .redis.scripts import Began, Finished, Pop, Popped, Refusal, Released

__all__ = ["Submitter", "SubmitJob", "Submitted", "BatchOutcome", "Inserts", "UNAVAILABLE",
           "unavailable"]


def _unavailable_errors() -> tuple[type[BaseException], ...]:
    import redis
    from sqlalchemy.exc import OperationalError
    return (redis.ConnectionError, redis.TimeoutError, OperationalError)


# Redis or the database not answering (the API answers 503; labelq.api.errors handles these)
UNAVAILABLE = _unavailable_errors()

_RECORDED = {
    True: "your label was recorded, but Redis did not answer to finish it; sending it again "
          "is safe (the answer is then a duplicate, and finishes it)",
    False: "your label was not recorded; send it again shortly: it is recorded then if its "
           "assignment (or, lost with Redis, its task) still takes it, else the answer says "
           "it was not saved",
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


@dataclass(frozen=True, slots=True)
class SubmitJob:
    """One submit, as the group commit (or a caller's own batch, :meth:`Submitter.run_batch`)
    takes it: ``value`` is in the project's label set (the facade checked it), and
    ``then_next`` is set only for an active worker."""

    worker: Worker
    project: Project
    assignment_id: str
    value: str
    then_next: bool


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a submit did: the label ``label`` for ``assignment_id`` is committed to SQL,
    ``duplicate`` when an earlier, identical submission had recorded it. ``asked_next``:
    the next assignment was asked for with it (an active worker's ``then_next``), and
    ``next`` is that assignment, or None when there is nothing for them (the budget
    spent included: the label is recorded all the same). ``idle_reason``: why there is no
    next, in words for the worker, when the facade was asked for it
    (:meth:`labelq.service.Service.submit_async`)."""

    assignment_id: str
    label: str
    duplicate: bool
    asked_next: bool = False
    next: Issued | None = None
    idle_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The in-process answer (``labelq submit``, :meth:`labelq.service.Service.submit`):
        ``assignment_id``, ``label``, ``duplicate``, and ``next`` (an :class:`Issued` or
        None) when it was asked for."""
        out: dict[str, Any] = {"assignment_id": self.assignment_id, "label": self.label,
                               "duplicate": self.duplicate}
        if self.asked_next:
            out["next"] = self.next
        return out


@dataclass(frozen=True, slots=True)
class _Committed:
    """The batch committed and finished the label; ``popped``: ``(now, POP_INBOX's
    answer)`` when the submit asked for its next assignment."""

    popped: tuple[int, Pop] | None


@dataclass(frozen=True, slots=True)
class _Alone:
    """Left to the caller: ``SUBMIT_BEGIN`` refused it, or the shared transaction hit a
    constraint (a duplicate somewhere in the batch) and nothing of it was committed."""

    began: Began | Refusal


# a submit's outcome once its batch ran (:meth:`Submitter.run_batch`), for
# :meth:`Submitter.settled` and :meth:`Submitter.complete`
BatchOutcome = _Committed | _Alone


class Submitter:
    """The submit path of one process (its threads share the group commit)."""

    def __init__(self, live: Live, assigner: Assigner) -> None:
        self.live = live
        self.assigner = assigner
        self.inserts = Inserts.of(live.engine)
        self._group = Group(self._begin, self._commit, self._finish)
        self._signer: IdSigner | None = None  # the recovery's, made at its first use

    def job(self, worker: Worker, project: Project, assignment_id: str, value: str, *,
            then_next: bool = False) -> SubmitJob:
        """A submit of ``value`` (in the project's label set) for :meth:`submit` or
        :meth:`run_batch`; ``then_next`` only for an active worker."""
        return SubmitJob(worker, project, assignment_id, value, then_next)

    def submit(self, job: SubmitJob) -> Submitted:
        """Record the label through the group commit; returns once it is committed to SQL
        (blocking), with the next assignment when the job asks for it."""
        outcome: BatchOutcome = self._group.call(job)
        return self.complete(job, outcome)

    def run_batch(self, jobs: list[SubmitJob]) -> list[Item]:
        """The group commit's three stages on ``jobs`` in the calling thread, one batch (for
        a caller that gathers the batch itself, as the API's committer thread does). Each
        item ends with ``result`` (its :data:`BatchOutcome`, for :meth:`settled` or
        :meth:`complete`) or ``error`` (raise it: the batch could not record it, see
        :func:`unavailable`)."""
        items = [Item(job) for job in jobs]
        for stage in (self._begin, self._commit, self._finish):
            live = [it for it in items if it.result is None and it.error is None]
            if not live:
                break
            try:
                stage(live)
            except BaseException as exc:  # noqa: BLE001 - handed to every submit of the batch
                for it in live:
                    if it.error is None and it.result is None:
                        it.error = exc
        return items

    @staticmethod
    def settled(job: SubmitJob, outcome: BatchOutcome) -> Submitted | None:
        """The submit's result when its batch did all there is to do (no I/O: callable on
        an event loop): the label committed and finished, and the next assignment not
        asked for or popped with its task's row in the batch's pipeline. Else None:
        :meth:`complete` finishes it (blocking)."""
        if not isinstance(outcome, _Committed):
            return None
        if not job.then_next:
            return Submitted(job.assignment_id, job.value, False)
        if outcome.popped is not None:
            got = outcome.popped[1]
            if isinstance(got, Popped) and got.row is not None:
                return Submitted(job.assignment_id, job.value, False, True,
                                 Issued.of(got.assignment_id, got.task, got.row,
                                           got.expires_ms))
        return None

    def complete(self, job: SubmitJob, outcome: BatchOutcome) -> Submitted:
        """A submit's result once its batch ran: a submit the batch could not finish is
        finished alone, and the next assignment is issued when asked for (blocking: Redis,
        SQL)."""
        worker = job.worker
        popped = None
        if isinstance(outcome, _Committed):
            out = Submitted(job.assignment_id, job.value, False)
            popped = outcome.popped
        else:
            out = self._alone(worker, job.project, job.assignment_id, job.value,
                              outcome.began)
        if not job.then_next:
            return out
        try:
            issued = self.assigner.next(worker, popped)
        except BudgetExhausted:
            # the label is recorded (and its answer must say so): the budget that ran
            # out is a reason for no next assignment, as capacity and a pause are
            issued = None
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=True) from exc
        return replace(out, asked_next=True, next=issued)

    def insert(self, conn: Any, rows: list[tuple[Any, ...]], now: int) -> None:
        """INSERT the ``Assignment`` and ``Label`` rows of ``(worker, project, aid, value,
        is_gold, task_id)`` tuples: one statement each, whatever their number."""
        self.inserts.run(conn, rows, utc_from_ms(now))

    # --- one submit alone ----------------------------------------------------------------
    def _alone(self, worker: Worker, project: Project, assignment_id: str, value: str,
               began: Began | Refusal) -> Submitted:
        """A submit the batch could not finish: refused by ``SUBMIT_BEGIN`` (a retry? an
        error), or in a transaction that hit a constraint (retried alone)."""
        live, handle = self.live, worker.handle
        if isinstance(began, Refusal):
            done = self._existing(worker, assignment_id, value)  # a retried submission?
            if done is not None:
                return self._finish_one(worker, project, assignment_id, done)
            if began is Refusal.FORBIDDEN:
                raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                                assignment=assignment_id, worker=handle)
            if began is Refusal.EXPIRED:
                res = live.scripts.release(live.keys(worker.project_id), assignment_id,
                                           expired_before_ms=now_ms())
                if isinstance(res, Released):
                    record_expired(live.engine, worker.project_id, [(assignment_id, res)],
                                   lease_ms=live.lease_ms)
                raise LeaseExpired(f"assignment {assignment_id!r} expired",
                                   assignment=assignment_id)
            # no lease: lost with Redis (a restart without persistence, a flush)? Taken
            # again when the task still takes this label, else a clear "not saved"
            again = self._recover(worker, assignment_id, value)
            if not isinstance(again, Began):
                return self._finish_one(worker, project, assignment_id, again)
            began = again
        # the batch's transaction failed on a constraint, or a lost lease was taken again:
        # this label alone, as before
        try:
            with live.engine.begin() as conn:
                self.insert(conn, [(worker, project, assignment_id, value, began.gold,
                                    _task_id(conn, worker.project_id, began))], now_ms())
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=None) from exc
        except IntegrityError:
            done = self._existing(worker, assignment_id, value)
            if done is not None:
                return self._finish_one(worker, project, assignment_id, done)
            if self._expired(assignment_id):  # stalled past the reaper's grace
                raise LeaseExpired(f"assignment {assignment_id!r} expired while its label "
                                   "was being saved", assignment=assignment_id) from None
            raise
        return self._finish_one(worker, project, assignment_id,
                                Submitted(assignment_id, value, False))

    def _recover(self, worker: Worker, aid: str, value: str) -> Began | Submitted:
        try:
            return self._take_again(worker, aid, value)
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=False) from exc

    def _take_again(self, worker: Worker, aid: str, value: str) -> Began | Submitted:
        """A submit that found no lease: if the lease was lost with Redis (the id names its
        task and a reservation time a lease's length ago at most, and the record has no
        row of it), issue it again (``RESERVE``: not seen by the worker, below the task's
        cap, within the worker's capacity and the budget — the hot state rebuilt first if
        Redis lost it) and begin the submit; the caller commits the label. Else raise an
        error that says the label was not saved. A concurrent retry that recorded it
        meanwhile answers as a duplicate (the returned :class:`Submitted`). Only an id
        this database issued to this worker is taken again (its MAC, :mod:`.leaseid`):
        any other is :class:`AssignmentUnknown`, before anything is read or written."""
        live = self.live
        not_saved = "your label was not saved"
        if parse_assignment_id(aid) is None:
            raise NotFound(f"no live assignment {aid!r} (never issued, or expired and "
                           f"returned to the pool): {not_saved}", assignment=aid,
                           recorded=False)
        if self._signer is None:
            self._signer = IdSigner(assignment_key(live.engine))
        lid = self._signer.issued(aid, worker.project_id, worker.seq)
        if lid is None:
            raise AssignmentUnknown(f"assignment {aid!r} was not issued to {worker.handle!r} "
                                    f"by this server (a made-up id, another annotator's, or "
                                    f"one issued before this server's upgrade and lost with "
                                    f"Redis): {not_saved}", assignment=aid, recorded=False)
        now = now_ms()
        with live.engine.connect() as conn:
            state = conn.execute(select(Assignment.state).where(Assignment.id == aid)
                                 ).scalar()
            task = conn.execute(select(Task.id, Task.is_gold)
                                .where(Task.project_id == worker.project_id,
                                       Task.seq == lid.task)).first()
            labelled = task is not None and conn.execute(
                select(Label.id).where(Label.task_id == task[0],
                                       Label.worker_id == worker.id).limit(1)).first()
        expires = lid.reserved_ms + live.tuning.hold_ms + live.lease_ms
        if state == "expired" or (task is not None and state is None and expires < now):
            raise LeaseExpired(f"assignment {aid!r} expired: {not_saved}", assignment=aid,
                               recorded=False)
        if state is not None or task is None or lid.reserved_ms > now + 60_000:
            raise NotFound(f"no live assignment {aid!r} (never issued, declined, or expired "
                           f"and returned to the pool): {not_saved}", assignment=aid,
                           recorded=False)
        if live.redis.hexists(live.keys(worker.project_id).declining, aid):
            # declined, its record still being written (or its process died: the retry of
            # the decline or the beat finishes it, :mod:`.decline`): not taken again
            raise NotFound(f"no live assignment {aid!r} (declined): {not_saved}",
                           assignment=aid, recorded=False)
        lost = (f"assignment {aid!r} was lost with the hot state (Redis restarted or was "
                f"flushed) and {{why}}: {not_saved}")
        if labelled:
            raise LeaseLost(lost.format(why="you have labelled its task since"),
                            assignment=aid, recorded=False, reason="labelled")
        hot = self.assigner.hot(worker)  # the hot state rebuilt if Redis lost it
        k = hot.keys
        res = reserve_for(live.scripts, k, hot, WorkerInfo.of(worker), lid.task, aid,
                          expires, live.key_ttl_ms, inbox=False)
        if res is not None and res.refusal is not None:
            done = self._existing(worker, aid, value)  # a concurrent retry?
            if done is not None:
                return done
            why = _LOST_WHY.get(res.refusal, "the task no longer takes it")
            raise LeaseLost(lost.format(why=why), assignment=aid, recorded=False,
                            reason=res.refusal.value)
        began = live.scripts.submit_begin(k, aid, worker.seq, now_ms())
        if not isinstance(began, Began):  # released in between (a decline, the reaper)
            raise NotFound(f"no live assignment {aid!r}: {not_saved}", assignment=aid,
                           recorded=False)
        return began

    def _finish_one(self, worker: Worker, project: Project, assignment_id: str,
                    done: Submitted) -> Submitted:
        """``SUBMIT_FINISH`` of one label SQL holds: committed alone, or a retried
        submission (a duplicate), whose reservation is finished in Redis too if nobody did
        — the first attempt may have died between its commit and its ``SUBMIT_FINISH`` (an
        API process killed, Redis down), and the hot state would stay one label short
        until the reaper's grace ran out. ``SUBMIT_FINISH`` is idempotent (the lease hash
        is the token): after a finished first attempt, this does nothing."""
        live = self.live
        try:
            finished = live.scripts.submit_finish(live.keys(worker.project_id), assignment_id,
                                                  project.max_labels,
                                                  wake_ttl_ms=live.tuning.wanted_ttl_ms)
        except UNAVAILABLE as exc:
            raise unavailable(exc, recorded=True) from exc
        if finished is Finished.WAKE and live.notify:
            live.notify(worker.project_id)
        return done

    def _expired(self, aid: str) -> bool:
        """Whether the record holds the assignment as expired (the reaper released it)."""
        with self.live.engine.connect() as conn:
            state = conn.execute(select(Assignment.state).where(Assignment.id == aid)
                                 ).scalar()
        return bool(state == "expired")

    def _existing(self, worker: Worker, aid: str, value: str) -> Submitted | None:
        with session_scope(self.live.engine) as session:
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
        return Submitted(aid, value, True)

    # --- the batch's three stages (group commit) --------------------------------------------
    # each item's result is a _Committed once its label is committed and finished, else an
    # _Alone for its caller to finish
    def _begin(self, batch: list[Item]) -> None:
        """Stage 1: one pipeline of ``SUBMIT_BEGIN`` (validates and marks the leases)."""
        scripts = self.live.scripts
        now = now_ms()
        pipe = scripts.pipeline()
        for it in batch:
            job: SubmitJob = it.args
            scripts.submit_begin(self.live.keys(job.worker.project_id), job.assignment_id,
                                 job.worker.seq, now, pipeline=pipe)
        try:
            outs = pipe.execute()
        except UNAVAILABLE as exc:
            _fail(batch, unavailable(exc, recorded=False))
            return
        for it, out in zip(batch, outs, strict=True):
            began = scripts.begin_result(out)
            if isinstance(began, Began):
                it.state = began
            else:
                it.result = _Alone(began)

    def _commit(self, batch: list[Item]) -> None:
        """Stage 2: one SQL transaction for the batch's ``Assignment`` and ``Label`` rows."""
        try:
            with self.live.engine.begin() as conn:
                rows = []
                for it in batch:
                    job: SubmitJob = it.args
                    began: Began = it.state
                    rows.append((job.worker, job.project, job.assignment_id, job.value,
                                 began.gold, _task_id(conn, job.worker.project_id, began)))
                self.insert(conn, rows, now_ms())
        except IntegrityError:
            for it in batch:
                it.result = _Alone(it.state)
        except UNAVAILABLE as exc:  # lost during the commit: it may have happened
            _fail(batch, unavailable(exc, recorded=None))

    def _finish(self, batch: list[Item]) -> None:
        """Stage 3: one pipeline of ``SUBMIT_FINISH`` (and the inbox pops of the submits
        that asked for their next assignment); wakes the applier where a finish asked."""
        try:
            self._finish_batch(batch)
        except UNAVAILABLE as exc:  # the labels are committed: a retry finishes them
            _fail(batch, unavailable(exc, recorded=True))

    def _finish_batch(self, batch: list[Item]) -> None:
        live = self.live
        scripts = live.scripts
        pipe = scripts.pipeline()
        jobs: list[SubmitJob] = [it.args for it in batch]
        for job in jobs:
            scripts.submit_finish(live.keys(job.worker.project_id), job.assignment_id,
                                  job.project.max_labels, pipeline=pipe,
                                  wake_ttl_ms=live.tuning.wanted_ttl_ms)
        # the next assignments asked for with these submits: their inbox pops, same trip
        now = now_ms()
        nexts = [it for it, job in zip(batch, jobs, strict=True) if job.then_next]
        for it in nexts:
            worker = it.args.worker
            scripts.pop_inbox(live.keys(worker.project_id), worker.seq, now, live.lease_ms,
                              live.key_ttl_ms, min_left_ms=live.tuning.min_left_ms,
                              pipeline=pipe, max_open=live.settings.max_open)
        replies = pipe.execute()
        woke = {job.worker.project_id for job, out in zip(jobs, replies[:len(jobs)], strict=True)
                if scripts.finish_result(out) is Finished.WAKE}
        for it in batch:
            it.result = _Committed(None)
        for it, out in zip(nexts, replies[len(batch):], strict=True):
            it.result = _Committed((now, scripts.pop_result(out)))
        if live.notify:
            for project_id in woke:
                live.notify(project_id)
        # labels are flowing: keep this process's policy state of their projects caught up
        # in the background, so that the first decision made at once after a busy period
        # (the inboxes served every next meanwhile) does not replay them all inline
        for project_id in {job.worker.project_id for job in jobs}:
            self.assigner.keep_fresh(project_id)


_LOST_WHY = {
    Refusal.SEEN: "you were given its task again since",
    Refusal.CAP: "its task has all the labels it takes now",
    Refusal.CAPACITY: "you are at your capacity now",
    Refusal.BUDGET: "the project's budget is spent now",
}


def _fail(batch: list[Item], error: BaseException) -> None:
    for it in batch:
        if it.result is None and it.error is None:
            it.error = error


_TASK_ID = select(Task.id).where(Task.project_id == bindparam("p"), Task.seq == bindparam("s"))


def _task_id(conn: Any, project_id: int, began: Began) -> int:
    """The task's SQL id: the one the lease carries, else looked up (older leases)."""
    if began.task_id is not None:
        return began.task_id
    return int(conn.execute(_TASK_ID, {"p": project_id, "s": began.task}).scalar_one())


class Inserts:
    """The submit path's two INSERTs, sent to the driver as plain SQL with positional
    parameters (``exec_driver_sql``; the record is SQLite or PostgreSQL): SQLAlchemy Core's
    per-statement work — compiled-cache lookup, parameter dicts, bind processing per row —
    cost about a fifth of a submit's CPU. The timestamp is converted once per batch with
    the dialect's own bind processor, so the stored values are the ones Core would store
    (tested byte for byte on both databases)."""

    _cache: dict[tuple[str, str], Inserts] = {}

    def __init__(self, dialect: Any) -> None:
        mark = "?" if dialect.paramstyle == "qmark" else "%s"

        def sql(table: Any, cols: list[str]) -> str:
            return (f"INSERT INTO {table.name} ({', '.join(cols)}) "
                    f"VALUES ({', '.join([mark] * len(cols))})")
        self.assignment = sql(getattr(Assignment, "__table__"), ["id", "project_id", "task_id",
                                                     "worker_id", "is_gold", "state",
                                                     "issued", "expires"])
        self.label = sql(getattr(Label, "__table__"), ["assignment_id", "project_id", "task_id",
                                           "worker_id", "value", "is_gold", "received",
                                           "suggested"])
        received = Label.__table__.c.received.type  # type: ignore[attr-defined]
        self.when = received.dialect_impl(dialect).bind_processor(dialect)

    @classmethod
    def of(cls, engine: Engine) -> Inserts:
        key = (engine.dialect.name, engine.dialect.paramstyle)
        got = cls._cache.get(key)
        if got is None:
            got = cls._cache[key] = cls(engine.dialect)
        return got

    def run(self, conn: Any, rows: list[tuple[Any, ...]], at: Any) -> None:
        t = self.when(at) if self.when is not None else at
        conn.exec_driver_sql(self.assignment, [
            (aid, p.id, tid, w.id, bool(g), "submitted", t, t)
            for w, p, aid, _v, g, tid in rows])
        # ``suggested``: the project showed the model's answer on the labeling page when
        # this label was given, and this assignment was not one withheld (issue 42,
        # labelq.record.withheld; the worker model checks whether it agrees)
        conn.exec_driver_sql(self.label, [
            (aid, p.id, tid, w.id, v, bool(g), t,
             marked_suggested(p.show_suggestions, w.id, tid))
            for w, p, aid, v, g, tid in rows])
