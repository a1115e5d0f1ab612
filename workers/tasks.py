"""Thin Celery tasks: take ids, call the live engine, are idempotent.

* ``labelq.apply_labels(project_id)`` → :meth:`labelq.live.applier.Applier.apply_pending`:
  fold the new labels into the posterior, then refill the inboxes of the active workers. A
  redelivered or duplicate message finds nothing unapplied (and at most tops up inboxes).
  A run that found another applier holding the lock retries while labels wait, one
  retrier at a time (:meth:`~labelq.live.applier.Applier.claim_retry`).
* ``labelq.maintain()`` (beat) → :func:`labelq.live.upkeep.maintain_project` for every
  project with hot state, then wake its applier.

The worker process's :class:`~labelq.live.applier.Applier` (its state cache, generator and
clocks) is made once, from the settings: in a prefork child when the child starts, with the
child's :class:`~labelq.live.warm.Warmer`, which loads the state of every project with hot
state while the child is idle (so whichever child gets a project's next run has it, and
none loads it on the request path); in another pool, at the first task.
"""

from __future__ import annotations

from functools import lru_cache

from celery.signals import worker_process_init

from labelq.db import get_engine
from labelq.live.applier import Applier
from labelq.live.redis.keys import GLOBAL_PROJECTS
from labelq.live.upkeep import maintain_project
from labelq.live.warm import Warmer

from .main import SETTINGS, app

__all__ = ["apply_labels", "maintain", "notify"]


@lru_cache(maxsize=1)
def _applier() -> Applier:
    import redis
    return Applier(get_engine(SETTINGS), redis.Redis.from_url(SETTINGS.redis_url),
                   settings=SETTINGS)


@worker_process_init.connect
def _start_warmer(**_: object) -> None:
    """In each prefork child, as it starts: its applier, and the warmer's thread."""
    Warmer(_applier()).start()


@app.task(name="labelq.apply_labels", bind=True, max_retries=None)
def apply_labels(self, project_id: int) -> int:
    applier = _applier()
    report = applier.apply_pending(int(project_id))
    if report.busy and applier.claim_retry(int(project_id), str(self.request.id)):
        raise self.retry(countdown=applier.tuning.retry_countdown_s)
    return report.applied


@app.task(name="labelq.maintain")
def maintain() -> dict:
    applier, out = _applier(), {}
    for raw in applier.redis.smembers(GLOBAL_PROJECTS):
        out[int(raw)] = maintain_project(applier, int(raw))
        apply_labels.delay(int(raw))
    return out


def notify(project_id: int) -> None:
    """The service's wake-up hook: enqueue ``apply_labels``."""
    apply_labels.delay(int(project_id))
