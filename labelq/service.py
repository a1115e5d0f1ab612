"""Service operations of the live pipeline: next assignment, submit, decline.

Used by the CLI (``labelq next/submit/decline``) and the HTTP API. This is the facade: it
looks the worker and the project up (cached briefly, so a pause takes effect within
``tuning.worker_max_age``), checks what belongs to the caller (an active worker, a label in
the label set), and hands over to the engine (:mod:`labelq.live`):

* **next** → :meth:`labelq.live.assign.Assigner.next` (pop the inbox, else decide at once);
* **submit** → :meth:`labelq.live.submit.Submitter.submit` (group commit: ``SUBMIT_BEGIN``,
  the SQL commit, ``SUBMIT_FINISH``; the OK only after the commit). Its result is a
  :class:`~labelq.live.submit.Submitted`: :meth:`Service.submit_label` in a thread, and
  :meth:`Service.submit_async` on an event loop — the API's one way in for a submit (its
  route and its fast path alike), whose batches its committer thread runs;
  :meth:`Service.submit` gives the result as a dict (the CLI). The label-set check is
  :meth:`Service._job`'s alone;
* **decline** → :func:`labelq.live.decline.decline`.

The ordering that makes crashes safe is described there and in ``docs/architecture.md``.
The applier is woken through ``notify(project_id)`` (the CLI wires it to the Celery task
``apply_labels``); this module never imports Celery.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import numpy as np
from sqlalchemy.engine import Engine

from .errors import Forbidden, InputError, NotFound
from .live.assign import BUDGET_SPENT, NOTHING_NOW, Assigner, Issued
from .live.context import Live
from .live.decide import decision_rng
from .live.decline import decline
from .live.home import claim_home
from .live.hotstate import StateCache
from .live.redis.scripts import Scripts
from .live.submit import UNAVAILABLE, BatchOutcome, SubmitJob, Submitted, Submitter, unavailable
from .live.tuning import TUNING, Tuning
from .record.db import session_scope
from .record.models import Project, Worker
from .record.projects import get_worker
from .record.settings import Settings, load_settings

__all__ = ["Service", "ProjectState", "Issued", "Submitted", "Batches", "ToThread", "UNAVAILABLE",
           "unavailable"]

_K = TypeVar("_K", tuple[str, int | None], int)
_V = TypeVar("_V", Worker, Project, "ProjectState")


@dataclass(frozen=True)
class ProjectState:
    """A project's state as ``labelq status`` says it: ``running``, ``finished`` (and
    ``why``: the budget spent, every task at its cap) or ``stalled``."""

    state: str
    why: str | None = None


class Batches(Protocol):
    """Runs submits in batches of its own (the API's committer thread,
    :class:`labelq.api.committer.Committer`): ``submit(job)`` resolves to the job's outcome
    once its batch ran (:meth:`~labelq.live.submit.Submitter.run_batch`)."""

    def submit(self, job: SubmitJob) -> Awaitable[BatchOutcome]: ...


# runs a blocking call in a thread pool from an event loop (the API: Starlette's
# run_in_threadpool)
ToThread = Callable[[Callable[[], Submitted]], Awaitable[Submitted]]


class Service:
    """One process's entry to the live engine (thread-safe; the API shares one).

    ``top_k``, ``state_max_age``, ``max_scan`` and ``worker_max_age`` override the
    ``tuning`` (tests and benchmarks)."""

    def __init__(self, engine: Engine, redis: Any, *, settings: Settings | None = None,
                 notify: Callable[[int], None] | None = None,
                 cache: StateCache | None = None, rng: np.random.Generator | None = None,
                 tuning: Tuning = TUNING, top_k: int | None = None,
                 state_max_age: float | None = None, max_scan: int | None = None,
                 worker_max_age: float | None = None) -> None:
        self.engine, self.redis = engine, redis
        self.settings = settings or load_settings()
        self.tuning = replace(
            tuning, top_k=tuning.top_k if top_k is None else top_k,
            state_max_age=tuning.state_max_age if state_max_age is None else state_max_age,
            max_scan=tuning.max_scan if max_scan is None else max_scan,
            worker_max_age=tuning.worker_max_age if worker_max_age is None else worker_max_age)
        self.notify = notify
        self.cache = cache or StateCache()
        self.scripts = Scripts(redis)
        # the database's identity names its Redis keys: read here, once, so that no
        # request pays a SQL round trip for it (raises, exit 9, before ``labelq init``)
        self.live = Live(engine, redis, self.scripts, self.settings, self.tuning, notify,
                         claim_home(engine, redis))
        self.assigner = Assigner(self.live, self.cache,
                                 rng or decision_rng(self.settings.decision_seed))
        self.submitter = Submitter(self.live, self.assigner)
        # (handle, project id or None) -> (when read, the worker row)
        self._workers: dict[tuple[str, int | None], tuple[float, Worker]] = {}
        self._projects: dict[int, tuple[float, Project]] = {}
        self._states: dict[int, tuple[float, ProjectState]] = {}
        self._renewing: set[tuple[str, object]] = set()

    # --- lookups ---------------------------------------------------------------------------
    def worker(self, handle: str, project_id: int | None = None) -> Worker:
        """The worker row (``handle``'s enrolment in project ``project_id``; None: their
        only one, or their default), cached for ``tuning.worker_max_age`` seconds (a pause
        takes effect within that long)."""
        return self._cached(self._workers, ("w", (handle, project_id)), self._read_worker)

    def _read_worker(self, key: tuple[str, int | None]) -> Worker:
        with session_scope(self.engine) as session:
            worker = get_worker(session, key[0], key[1])
        self._workers[key] = (time.monotonic(), worker)
        return worker

    def _cached(self, cache: dict[_K, tuple[float, _V]], key: tuple[str, _K],
                read: Callable[[_K], _V]) -> _V:
        """``cache[key[1]]`` while younger than ``tuning.worker_max_age`` (renewed in the
        background from half that age on), else ``read(key[1])``, which stores it."""
        hit = cache.get(key[1])
        if hit is not None:
            age = time.monotonic() - hit[0]
            if age < self.tuning.worker_max_age:
                if age >= self.tuning.worker_max_age / 2:
                    self._renew(key, lambda: read(key[1]))
                return hit[1]
        return read(key[1])

    def _peek(self, cache: dict[_K, tuple[float, _V]], key: _K) -> _V | None:
        """``cache[key]`` while younger than ``tuning.worker_max_age``, else None: no I/O
        and no renewal (on an event loop; a caller that finds None goes to a thread, where
        :meth:`_cached` reads the row again)."""
        hit = cache.get(key)
        if hit is None or time.monotonic() - hit[0] >= self.tuning.worker_max_age:
            return None
        return hit[1]

    def _renew(self, key: tuple[str, object], read: Callable[[], object]) -> None:
        """Read a cached row again in a background thread, once half its age is gone, so
        that a caller who keeps asking finds it fresh instead of waiting for the SQL read
        (a row served is never older than ``tuning.worker_max_age`` either way)."""
        if key in self._renewing:
            return
        self._renewing.add(key)

        def run() -> None:
            try:
                read()
            except Exception:  # noqa: BLE001 - the caller past the max age reads it itself
                pass
            finally:
                self._renewing.discard(key)
        threading.Thread(target=run, name="labelq-row-renew", daemon=True).start()

    def project(self, project_id: int) -> Project:
        """The project row, cached like the worker rows (its label set and cap)."""
        return self._cached(self._projects, ("p", project_id), self._read_project)

    def _read_project(self, project_id: int) -> Project:
        with session_scope(self.engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                raise NotFound(f"no project with id {project_id}", project_id=project_id)
            session.expunge(project)
        self._projects[project_id] = (time.monotonic(), project)
        return project

    # --- operations ------------------------------------------------------------------------
    def next_assignment(self, handle: str, project_id: int | None = None) -> Issued | None:
        """The worker's next assignment, or ``None`` when there is nothing for them."""
        worker = self.worker(handle, project_id)
        if worker.status != "active":
            raise self._refusal(worker)
        return self.assigner.next(worker)

    def suggestion(self, project: Project, task_seq: int, worker_id: int) -> str | None:
        """The model's answer the labeling page shows worker ``worker_id`` beside task
        ``task_seq`` of a project that shows suggestions
        (:func:`labelq.record.predictions.suggestion`)."""
        from .record.predictions import suggestion

        with session_scope(self.engine) as session:
            return suggestion(session, project, task_seq, worker_id)

    def _refusal(self, worker: Worker) -> Forbidden:
        """Why a worker who is not active gets nothing: for a pause, its trail (when, by
        which rule, on what evidence: :mod:`labelq.record.pauses`), read from SQL."""
        from .record.pauses import last_pauses, pause_trail
        handle = worker.handle
        if worker.status == "paused" and worker.id is not None:
            with session_scope(self.engine) as session:
                event = last_pauses(session, [worker.id]).get(worker.id)
                if event is not None:
                    trail = pause_trail(event)
                    return Forbidden(f"worker {handle!r} is {trail['text']}", worker=handle,
                                     pause=trail)
        return Forbidden(f"worker {handle!r} is {worker.status}", worker=handle)

    def idle_reason(self, handle: str, project_id: int | None = None) -> str:
        """Why :meth:`next_assignment` has nothing for the worker, in words for them: at
        capacity (with open assignments still to finish, or not), the budget spent, or what
        is left of it all held by open assignments, else the project finished (``finished:
        ...``) or stalled (``stalled: ...``; the labeling page stops asking on either), else
        nothing right now. A Redis read or two (and :meth:`project_state`); call it only
        when there was nothing."""
        worker = self.worker(handle, project_id)
        reason = self.assigner.idle_reason(worker, self.project(worker.project_id))
        if reason not in (NOTHING_NOW, BUDGET_SPENT):
            return reason
        st = self.project_state(worker.project_id)
        if st.state == "finished":
            return f"finished: the project needs no more labels ({st.why}); thank you"
        if st.state == "stalled":
            return ("stalled: no task is left that you can label, and the project waits for "
                    "its operator (to enrol or resume annotators); nothing will come until "
                    "then")
        return reason

    def project_state(self, project_id: int) -> ProjectState:
        """The project's state (``running``, ``finished`` or ``stalled``), as
        ``labelq status`` says it (:func:`labelq.reporting.project_status`: the counters,
        and the stall check's bounded reads), kept like the rows for
        ``tuning.worker_max_age`` seconds: annotators asking again and again while
        nothing is left cost one status read per project per that long."""
        return self._cached(self._states, ("s", project_id), self._read_state)

    def _read_state(self, project_id: int) -> ProjectState:
        from .reporting import project_status

        with session_scope(self.engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                raise NotFound(f"no project with id {project_id}", project_id=project_id)
            st = project_status(session, project)
        out = ProjectState(str(st["state"]), st["finished"])
        self._states[project_id] = (time.monotonic(), out)
        return out

    def submit(self, handle: str, assignment_id: str, value: str, *,
               then_next: bool = False, project_id: int | None = None) -> dict[str, Any]:
        """:meth:`submit_label`'s result as a dict (:meth:`~labelq.live.submit.Submitted.
        as_dict`), for in-process callers (``labelq submit``, benchmarks)."""
        return self.submit_label(handle, assignment_id, value, then_next=then_next,
                                 project_id=project_id).as_dict()

    def submit_label(self, handle: str, assignment_id: str, value: str, *,
                     then_next: bool = False, project_id: int | None = None) -> Submitted:
        """Record the label; returns only once it is committed to SQL (blocking). Concurrent
        submits of this process's threads share one batch (group commit): one Redis pipeline
        for their ``SUBMIT_BEGIN``, one SQL transaction, one pipeline for their
        ``SUBMIT_FINISH`` — three stages, each overlapping the neighbouring batches' other
        stages.

        ``then_next``: also issue the worker's next assignment, as :meth:`next_assignment`
        would (``next``: an :class:`Issued`, or ``None`` when there is nothing for them or
        they are paused); its inbox pop rides in the ``SUBMIT_FINISH`` pipeline, so an
        annotator's submit-and-continue costs one request and no extra round trip. The
        label is recorded first: an error there raises as without ``then_next``; after it,
        an exhausted budget is ``next`` None (:meth:`idle_reason` says why), not an error
        that would hide the recorded label."""
        worker = self.worker(handle, project_id)
        job = self._job(worker, self.project(worker.project_id), assignment_id, value,
                        then_next)
        return self.submitter.submit(job)

    async def submit_async(self, handle: str, assignment_id: str, value: str, *,
                           then_next: bool, batches: Batches,
                           to_thread: ToThread, project_id: int | None = None) -> Submitted:
        """:meth:`submit_label` for an event loop: the API's one way in for a submit (its
        route and its fast path alike), the result's ``idle_reason`` set when ``then_next``
        found no next assignment. When the worker and project rows are cached, the submit
        joins one of ``batches`` (the API's committer thread), and a result the batch
        settled (:meth:`~labelq.live.submit.Submitter.settled`: committed, its next
        assignment popped in the batch or not asked for) is returned here, on the loop;
        what else it needs — rows to read first, finishing it alone, deciding its next
        assignment at once, why there is none — is one ``to_thread`` call (blocking work
        in a thread pool). Raises as :meth:`submit_label` does."""
        explain = (handle, project_id) if then_next else None
        job = self._cached_job((handle, project_id), assignment_id, value, then_next)
        if job is None:
            return await to_thread(lambda: self._explained(self.submit_label(
                handle, assignment_id, value, then_next=then_next, project_id=project_id),
                explain))
        outcome = await batches.submit(job)
        done = self.submitter.settled(job, outcome)
        if done is not None and (done.next is not None or not then_next):
            return done
        return await to_thread(lambda: self._explained(self.submitter.complete(job, outcome),
                                                       explain))

    def _job(self, worker: Worker, project: Project, assignment_id: str, value: str,
             then_next: bool) -> SubmitJob:
        """The submit for the engine, once ``value`` is found in the label set (else
        :class:`InputError`); the next assignment is asked for only for an active
        worker."""
        if value not in project.labels:
            raise InputError(f"label {value!r} is not in the label set {project.labels}",
                             label=value)
        return self.submitter.job(worker, project, assignment_id, value,
                                  then_next=then_next and worker.status == "active")

    def _cached_job(self, key: tuple[str, int | None], assignment_id: str, value: str,
                    then_next: bool) -> SubmitJob | None:
        """:meth:`_job` when the worker and project rows are cached (no SQL: callable on
        an event loop), else None."""
        worker = self._peek(self._workers, key)
        if worker is None:
            return None
        project = self._peek(self._projects, worker.project_id)
        if project is None:
            return None
        return self._job(worker, project, assignment_id, value, then_next)

    def _explained(self, out: Submitted, who: tuple[str, int | None] | None) -> Submitted:
        """``out`` with why there is no next assignment for worker ``who`` (handle,
        project id) when there is none (a Redis read or two); ``who`` None: ``out`` as it
        is."""
        if who is not None and out.next is None:
            return replace(out, idle_reason=self.idle_reason(*who))
        return out

    def decline(self, handle: str, assignment_id: str,
                project_id: int | None = None) -> dict[str, Any]:
        return decline(self.live, self.worker(handle, project_id), assignment_id)
