"""Thin Celery tasks: take ids, call the live engine, are idempotent.

* ``labelq.apply_labels(project_id, database)`` → :meth:`labelq.live.applier.Applier.apply_pending`:
  fold the new labels into the posterior, then refill the inboxes of the active workers. A
  redelivered or duplicate message finds nothing unapplied (and at most tops up inboxes).
  A run that found another applier holding the lock retries while labels wait, one
  retrier at a time (:meth:`~labelq.live.applier.Applier.claim_retry`). Then the gold
  marks queued until an assignment ended (:func:`labelq.live.upkeep.apply_queued`).
* ``labelq.maintain()`` (beat) → :func:`labelq.live.upkeep.maintain_project` for every
  project with hot state, then wake its applier; and where the dashboard's figures are
  due (:func:`labelq.dashboard.figures_due`), enqueue ``labelq.figures`` for them.
* ``labelq.figures(project_id, database)`` → :func:`labelq.dashboard.refresh_figures`, in
  a thread of the worker process (the pool's slot stays free for the applier): the
  dashboard's heavy figures (agreement, accuracy estimate, gold per annotator,
  throughput, gold suggestions) computed from the labels and stored with their time; the
  dashboard serves them with their age. Claimed in SQL: two runs never compute one
  project's at once, and a redelivered message finds them fresh.

The worker process's :class:`~labelq.live.applier.Applier` (its state cache, generator and
clocks) is made once, from the settings: in a prefork child when the child starts, with the
child's :class:`~labelq.live.warm.Warmer`, which loads the state of every project with hot
state while the child is idle (so whichever child gets a project's next run has it, and
none loads it on the request path); in another pool, at the first task.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import lru_cache

from celery import Task
from celery.signals import worker_process_init

from labelq.live.applier import Applier
from labelq.live.upkeep import apply_queued, maintain_project
from labelq.live.warm import Warmer
from labelq.record.db import database_id

from .main import SETTINGS, app, queue_for
from .ours import ours

__all__ = ["apply_labels", "maintain", "figures", "notify_for"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _applier() -> Applier:
    from labelq.live.redis.connect import connect
    from labelq.record.location import open_configured
    # the database must exist with its identity (``labelq init``): a worker never makes one
    return Applier(open_configured(SETTINGS), connect(SETTINGS.redis_url),
                   settings=SETTINGS)


# (Celery ships no type hints: its decorators leave what they wrap untyped)
@worker_process_init.connect  # type: ignore[untyped-decorator]
def _start_warmer(**_: object) -> None:
    """In each prefork child, as it starts: its applier, and the warmer's thread (not in
    the long work process ``labelq run-worker`` starts: it applies no label)."""
    import os
    if os.environ.get("LABELQ_WORKER_LONG"):
        return
    Warmer(_applier()).start()


@app.task(name="labelq.apply_labels", bind=True, max_retries=None)  # type: ignore[untyped-decorator]
def apply_labels(self: Task, project_id: int, database: str | None = None) -> int:
    applier = _applier()
    if not ours(applier.engine, database, f"apply_labels for project {project_id}"):
        return 0
    report = applier.apply_pending(int(project_id))
    if report.busy and applier.claim_retry(int(project_id), str(self.request.id)):
        raise self.retry(countdown=applier.tuning.retry_countdown_s)
    if not report.busy:  # gold marks queued until an assignment ended (a label, a decline)
        apply_queued(applier, int(project_id))
    return report.applied


@app.task(name="labelq.maintain")  # type: ignore[untyped-decorator]
def maintain() -> dict[int, dict[str, int]]:
    from labelq.dashboard import figures_due
    from labelq.live.failover import check_failover

    applier, out = _applier(), {}
    database = database_id(applier.engine)
    # a replica promoted by Sentinel may lack the last writes: rebuilt from SQL
    rebuilt = check_failover(applier.engine, applier.redis, database)
    if rebuilt:
        log.warning("Redis failed over (a promoted replica): hot state of projects %s "
                    "rebuilt from SQL", rebuilt)
    for raw in applier.redis.smembers(applier.projects_key):
        out[int(raw)] = maintain_project(applier, int(raw))
        if int(raw) in rebuilt:
            out[int(raw)]["rebuilt_after_failover"] = 1
        apply_labels.apply_async((int(raw), database),
                                 queue=queue_for("labelq.apply_labels", database))
        try:
            if figures_due(applier.engine, int(raw)):
                figures.apply_async((int(raw), database),
                                    queue=queue_for("labelq.figures", database))
        except Exception:  # noqa: BLE001 - the figures only feed the dashboard
            log.exception("dashboard figures of project %s not scheduled", raw)
    return out


# the projects whose figures a thread of this process is computing
_figures_running: set[int] = set()
_figures_lock = threading.Lock()


@app.task(name="labelq.figures")  # type: ignore[untyped-decorator]
def figures(project_id: int, database: str | None = None) -> bool:
    """Start computing the project's dashboard figures in a thread of this process (at
    millions of labels it takes minutes: in the task itself it would hold the pool's slot,
    and with one slot — ``run-worker``'s default — no label would be applied meanwhile);
    True if it started one. The claim in SQL keeps other processes off the project."""
    from labelq.dashboard import refresh_figures

    applier = _applier()
    if not ours(applier.engine, database, f"figures for project {project_id}"):
        return False
    pid = int(project_id)
    with _figures_lock:
        if pid in _figures_running:
            return False
        _figures_running.add(pid)

    def run() -> None:
        try:
            refresh_figures(applier.engine, pid)
        except Exception:  # noqa: BLE001 - logged; the beat asks again
            log.exception("dashboard figures of project %s not computed", pid)
        finally:
            with _figures_lock:
                _figures_running.discard(pid)

    threading.Thread(target=run, name=f"labelq-figures-{pid}", daemon=True).start()
    return True


def notify_for(database: str) -> Callable[[int], None]:
    """The service's wake-up hook for database ``database``: enqueue ``apply_labels``
    naming it, on its database's queue (a worker of another database sharing a queue set
    by LABELQ_CELERY_QUEUE leaves it alone)."""
    queue = queue_for("labelq.apply_labels", database)

    def notify(project_id: int) -> None:
        apply_labels.apply_async((int(project_id), database), queue=queue)
    return notify
