"""Thin Celery tasks: take ids, call a pure ``labelq`` function, are idempotent.

* ``labelq.apply_labels(project_id)`` → :func:`labelq.live.applier.apply_pending`: fold
  the new labels into the posterior, then refill the inboxes of the active workers. A
  redelivered or duplicate message finds nothing unapplied (and at most tops up inboxes).
* ``labelq.maintain()`` (beat) → expire leases and held inbox reservations whose hold ran
  out, take in new tasks, reopen tasks below a raised label cap, and run every project's
  applier (which refreshes the inboxes).
"""

from __future__ import annotations

from functools import lru_cache

from labelq.db import get_engine
from labelq.live.applier import apply_pending
from labelq.live.redis.keys import GLOBAL_PROJECTS, Keys
from labelq.live.reaper import expire_leases
from labelq.live.rebuild import add_new_tasks, reopen_below_cap
from labelq.settings import load_settings

from .main import app

__all__ = ["apply_labels", "maintain", "notify"]


@lru_cache(maxsize=1)
def _engine():
    return get_engine(load_settings())


@lru_cache(maxsize=1)
def _redis():
    import redis
    return redis.Redis.from_url(load_settings().redis_url)


@app.task(name="labelq.apply_labels", bind=True, max_retries=None)
def apply_labels(self, project_id: int) -> int:
    report = apply_pending(_engine(), _redis(), int(project_id))
    r, k = _redis(), Keys(project_id)
    if report.busy and r.exists(k.apply_wanted):
        # another applier holds the lock; it will see the flag, but if it died, the lock
        # expires and this retry takes over. One retrier at a time (``apply_retry``): a
        # holder that keeps running leaves the flag set, and the beat's wake-ups would
        # otherwise pile up, each retrying every second
        me = str(self.request.id)
        if r.set(k.apply_retry, me, nx=True, px=3000) or \
                (r.get(k.apply_retry) or b"").decode() == me:
            r.pexpire(k.apply_retry, 3000)
            raise self.retry(countdown=1)
    return report.applied


@app.task(name="labelq.maintain")
def maintain() -> dict:
    from labelq.live.applier import CACHE
    out = {}
    r = _redis()
    for raw in r.smembers(GLOBAL_PROJECTS):
        pid = int(raw)
        out[pid] = expire_leases(_engine(), r, pid)
        add_new_tasks(_engine(), r, pid, CACHE)
        reopen_below_cap(_engine(), r, pid, CACHE)
        apply_labels.delay(pid)
    return out


def notify(project_id: int) -> None:
    """The service's wake-up hook: enqueue ``apply_labels``."""
    apply_labels.delay(int(project_id))
