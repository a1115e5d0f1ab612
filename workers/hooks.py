"""Celery tasks of the webhooks (issue 43), thin: the delivery logic is
:mod:`labelq.hooks`. Both go to the hooks' queue (``<queue>.hooks``:
:func:`workers.main.queue_for`), which ``labelq run-worker`` serves in a process of its
own (threads: deliveries wait on the network), so labels and exports never wait behind a
receiver.

* ``labelq.hooks_sweep()`` (beat) → :func:`labelq.hooks.sweep`: emit the conditions that
  started (finished, stalled, budget below, gold seen through), claim the due events of the
  outbox and enqueue one ``labelq.deliver_hook`` each.
* ``labelq.deliver_hook(event_id, database, claim)`` → :func:`labelq.hooks.deliver`: one
  try; a failed one is due again after its backoff, and the sweep enqueues it then. A
  redelivered message of a delivered event does nothing, nor does one whose claim was
  taken over (it waited in the queue so long that the sweep enqueued the event again).

Every worker process sends the delivery of an event its tasks write (an annotator paused
by the quality rule, an export ready, a condition the watch found) as soon as its
transaction commits (:func:`labelq.hooks.deliver_at_once`, from ``worker_init``), not at
the next beat's sweep, which stays the safety net.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from celery.signals import worker_init

from labelq.hooks import DELIVER_TASK, deliver, deliver_at_once, sweep
from labelq.record.db import database_id

from .main import SETTINGS, app, queue_for

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["deliver_hook", "hooks_sweep", "send_delivery"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _engine() -> Engine:
    from labelq.record.location import open_configured
    return open_configured(SETTINGS)


# (Celery ships no type hints: its decorator leaves what it wraps untyped)
@app.task(name="labelq.deliver_hook")  # type: ignore[untyped-decorator]
def deliver_hook(event_id: str, database: str | None = None, claim: str | None = None) -> str:
    engine = _engine()
    if database is not None and database != database_id(engine):
        log.warning("hook event %s of database %s, but this worker serves database %s: "
                    "ignored (give each database its own LABELQ_CELERY_QUEUE)", event_id,
                    database, database_id(engine))
        return "ignored"
    attempt = deliver(engine, event_id, claim=claim, allowed=SETTINGS.hook_networks)
    return "none" if attempt is None else attempt.state


@app.task(name="labelq.hooks_sweep")  # type: ignore[untyped-decorator]
def hooks_sweep() -> int:
    engine = _engine()
    _emitted, due = sweep(engine)
    database = database_id(engine)
    queue = queue_for(DELIVER_TASK, database)
    for event_id, claim in due:
        deliver_hook.apply_async((event_id, database, claim), queue=queue)
    return len(due)


def send_delivery(name: str, args: list[Any]) -> None:
    """Send task ``name`` (a delivery: ``[event id, database, claim]``) to the hooks' queue
    of the database it names (:func:`labelq.hooks.deliver_at_once`'s sender)."""
    app.send_task(name, args=args, queue=queue_for(name, str(args[1])))


@worker_init.connect  # type: ignore[untyped-decorator]
def _deliver_at_once(**_: object) -> None:
    """In the worker's main process, before its pool starts (forked children inherit it):
    the events committed here are delivered at once."""
    deliver_at_once(send_delivery)
