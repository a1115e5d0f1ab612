"""Celery app factory. ``celery -A workers.main worker --beat`` runs a worker (with beat).

Delivery settings make a SIGKILLed worker lose nothing: ``task_acks_late`` (a message is
acknowledged after the task ran), ``task_reject_on_worker_lost`` (a message whose worker
process died goes back to the queue), ``worker_prefetch_multiplier=1`` (a worker holds one
message at a time). The broker is ``LABELQ_REDIS_URL``; its keys never start with ``lq:``.
Correctness does not rest on redelivery anyway: the applier works from SQL (unapplied
labels), and the beat wakes it every few seconds.

A Redis outage does not end the worker: it reconnects for as long as it takes (kombu's
backoff, 2 s growing to 30 s between tries), with the transport of :mod:`workers.broker`
(kombu's, less a crash when the connection drops while a message is unacknowledged).

A ``redis+sentinel://`` URL (:mod:`labelq.live.redis.connect`) selects kombu's sentinel
transport, with the same fix (:class:`workers.broker.SentinelTransport`): every
(re)connection asks the sentinels where the master is, so after a failover the worker's
reconnection finds the promoted replica.

Queues: each database has its own, ``labelq.<database id>`` (``<queue>.long`` for long
work, ``<queue>.hooks`` for webhook deliveries: :class:`~labelq.record.settings.Settings`
names them), unless ``LABELQ_CELERY_QUEUE`` names one: several databases on one Redis then
never send their wake-ups to each other's workers. Every sender names the queue of the
database it sends for (:func:`queue_for`, ``workers.tasks.notify_for``); a process that
sends without naming one gets its own database's, read when first needed
(:func:`database`): importing this module opens no database (the API, ``labelq check``
and the CLI import it). A worker or beat reads it as it starts and, if it cannot (no
database: ``labelq init``), refuses to start, saying why.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from functools import lru_cache
from typing import Any

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from labelq.live.redis.connect import celery_broker
from labelq.record.settings import Settings, load_settings

__all__ = ["create_app", "app", "SETTINGS", "database", "queue", "queue_for",
           "UNRESOLVED_QUEUE"]

# kombu's name of the sentinel transport means ours in labelq's processes: a sentinel
# broker URL lists every sentinel (``sentinel://A;sentinel://B``), and when the connection
# drops kombu switches to the next one, taking the transport from its scheme — which left
# ``broker_transport`` behind, and the reconnected worker ran kombu's, without the fix
TRANSPORT_ALIASES["sentinel"] = "workers.broker:SentinelTransport"

SETTINGS = load_settings()
# long work (exports) goes to a queue of its own, so a label is never applied behind it
# (``labelq run-worker`` serves it in a process of its own): ``<queue>.long``
LONG_TASKS = frozenset({"labelq.export"})
# webhook deliveries and their beat (workers/hooks.py) go to ``<queue>.hooks``: a receiver
# that is slow or down never holds a slot a label or an export needs
HOOKS_TASKS = frozenset({"labelq.deliver_hook", "labelq.hooks_sweep"})
# what a process whose database could not be read sends to by default: no worker serves it
# (every sender names its queue; a worker or beat without its database does not start)
UNRESOLVED_QUEUE = "labelq.no-database"


@lru_cache(maxsize=1)
def _database() -> tuple[str | None, str | None]:
    """(the configured database's id, None), or (None, why it could not be read): read
    once, when first asked (a send without a queue named, a worker or beat starting)."""
    from labelq.record.db import database_id
    from labelq.record.location import open_configured
    try:
        engine = open_configured(SETTINGS)
    except Exception as exc:  # noqa: BLE001 - said when a worker or beat starts
        return None, str(exc)
    try:
        return database_id(engine), None
    finally:
        # (a prefork worker's children must not inherit this engine's pooled connections)
        engine.dispose()


def database() -> str | None:
    """The id of the database this process serves (``None``: it could not be read)."""
    return _database()[0]


def queue() -> str | None:
    """The queue this process's tasks go to: ``LABELQ_CELERY_QUEUE``, else its database's
    own (``labelq.<database id>``; ``None`` when the database could not be read)."""
    if SETTINGS.celery_queue is not None:
        return SETTINGS.celery_queue
    own = database()
    return SETTINGS.queue_of(own) if own is not None else None


def queue_for(name: str, database: str | None = None, settings: Settings = SETTINGS) -> str:
    """The queue task ``name`` of database ``database`` (default: this process's) goes to:
    the long work queue for :data:`LONG_TASKS`, the hooks' for :data:`HOOKS_TASKS`. Raises
    :class:`ServiceUnavailable` when this process's database could not be read (no queue
    to send to)."""
    if database is None and settings.celery_queue is None:
        database, error = _database()
        if database is None:
            from labelq.errors import ServiceUnavailable
            raise ServiceUnavailable(f"no Celery queue to send {name} to: this process's "
                                     f"database could not be read ({error})")
    # (with LABELQ_CELERY_QUEUE set the database is no part of the name)
    of = (settings.hooks_queue_of if name in HOOKS_TASKS else
          settings.long_queue_of if name in LONG_TASKS else settings.queue_of)
    return of(database or "")


def create_app(redis_url: str | None = None, settings: Settings = SETTINGS,
               queue: str | None = None) -> Celery:
    """The Celery app. A task sent without a queue of its own goes to ``queue`` (its
    ``.long``/``.hooks`` queue: :func:`queue_for`), else ``LABELQ_CELERY_QUEUE``'s, else
    this process's database's (read at the first such send)."""
    url = redis_url or settings.redis_url
    fixed = queue or settings.celery_queue
    routing = replace(settings, celery_queue=fixed) if fixed else settings

    def route(name: str, args: object, kwargs: object, options: dict[str, Any],
              task: object = None, **_: object) -> dict[str, str] | None:
        # (Celery's router protocol; a queue the sender named stands)
        if options.get("queue") is not None:
            return None
        return {"queue": queue_for(name, settings=routing)}

    # a redis+sentinel:// URL becomes kombu's sentinel:// form and its master's name
    broker, options = celery_broker(url)
    celery = Celery("labelq", broker=broker, include=["workers.tasks", "workers.jobs",
                                                             "workers.serving", "workers.hooks"])
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        # what a worker started without -Q consumes: set when it starts, once its database
        # is read (_serve_own_queue)
        task_default_queue=fixed or UNRESOLVED_QUEUE,
        task_routes=(route,),
        broker_connection_retry_on_startup=True,
        # keep reconnecting for as long as Redis is away (the default gives up after 100
        # tries, about 3 hours at the top interval, and the worker exits)
        broker_connection_max_retries=None,
        # kombu's Redis transport with the fix that keeps the worker alive when Redis
        # restarts while a task is unacknowledged (workers/broker.py)
        broker_transport=("workers.broker:SentinelTransport" if options
                          else "workers.broker:Transport"),
        # a task running when the connection drops finishes (its ack is lost; the message
        # comes back after the visibility timeout and finds nothing to do): cancelling it
        # would kill an applier between its SQL commit and its Redis writes
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # an unacknowledged message of a vanished worker is redelivered after this long
        broker_transport_options={"visibility_timeout": settings.visibility_timeout,
                                  **options},
        worker_hijack_root_logger=False,
        beat_schedule={"labelq-maintain": {"task": "labelq.maintain",
                                           "schedule": settings.beat_seconds},
                       # the hooks' outbox and conditions (workers/hooks.py), on the hooks'
                       # queue; one not taken within a minute (or ten beats) is dropped, so
                       # a stopped hooks worker does not find a pile of them (expiring at
                       # the next beat dropped 30 of 67 in a bench run on a loaded machine,
                       # delaying deliveries)
                       "labelq-hooks": {"task": "labelq.hooks_sweep",
                                        "schedule": settings.beat_seconds,
                                        "options": {"expires": max(
                                            60.0, 10 * settings.beat_seconds)}}},
        # the beat's own bookkeeping (when it last ran each entry), out of the current
        # folder: Celery's default wrote celerybeat-schedule wherever run-worker was started
        # (a queue not known yet: BeatScheduler names the file after the database's)
        beat_schedule_filename=beat_schedule_file(url, fixed or UNRESOLVED_QUEUE),
        labelq_redis_url=url,
        # which makes that folder when the beat starts (not when any process configures
        # the app: the demo and the API configure it and run no beat)
        beat_scheduler="workers.main:BeatScheduler",
    )
    return celery


def _private(folder: str) -> bool | None:
    """Whether ``folder`` is a folder (not a link to one) of this user's that no one else
    may write to; None when it is not there (or on a system without user ids). The beat's
    schedule file is a shelve, pickles the beat loads: one that another user can replace
    would run their code as this user."""
    if not hasattr(os, "getuid"):
        return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() \
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def beat_schedule_file(redis_url: str, queue: str) -> str:
    """Where the beat keeps its schedule state: a private folder of this user in the
    system's temporary folder (``$TMPDIR/labelq-<uid>/``), one file per broker and queue.
    Losing it costs nothing: the beat only runs ``labelq.maintain`` a period early."""
    import hashlib
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = os.path.join(tempfile.gettempdir(), f"labelq-{uid}")
    # made by BeatScheduler when a beat starts; not a private folder of this user's (someone
    # else's, a link, writable by others): Celery's default
    if _private(folder) is False:
        return "celerybeat-schedule"
    tag = hashlib.sha256(f"{redis_url}\n{queue}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"beat-schedule-{tag}")


app = create_app()


from celery.beat import PersistentScheduler  # noqa: E402
from celery.signals import beat_init, celeryd_init  # noqa: E402


@celeryd_init.connect  # type: ignore[untyped-decorator]
@beat_init.connect  # type: ignore[untyped-decorator]
def _serve_own_queue(**_: object) -> None:
    """A worker or beat reads its database as it starts; one whose database could not be
    read does not start: it would not know its database's queue (nor apply anything). (A
    SystemExit: Celery's signals log and swallow other exceptions.) A worker started
    without -Q consumes its database's queue."""
    own = queue()
    if own is None:
        raise SystemExit(f"labelq: the Celery worker (or beat) cannot start: {_database()[1]} "
                         "(its queue is the database's own, labelq.<database id>; "
                         "or set LABELQ_CELERY_QUEUE)")
    if app.conf.task_default_queue == UNRESOLVED_QUEUE:
        app.conf.task_default_queue = own


class BeatScheduler(PersistentScheduler):  # type: ignore[misc]
    """Celery's persistent scheduler that first makes the private folder of its schedule
    file (:func:`beat_schedule_file`), so only a process that runs a beat creates it; a
    file named before the database was read is named after the database's queue."""

    def setup_schedule(self) -> None:
        # (Celery ships no type hints: the attributes its __init__ sets, read untyped)
        filename: str = getattr(self, "schedule_filename")
        url = getattr(self, "app").conf.get("labelq_redis_url")
        if url and filename == beat_schedule_file(url, UNRESOLVED_QUEUE):
            filename = self.schedule_filename = beat_schedule_file(
                url, queue() or UNRESOLVED_QUEUE)
        folder = os.path.dirname(filename)
        if folder:
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError:  # not writable: Celery's own default file, in the cwd
                self.schedule_filename = "celerybeat-schedule"
            # checked again once it exists: another user may have made it (or a link) since
            # beat_schedule_file looked, and makedirs takes any folder that is there
            if _private(folder) is False:
                self.schedule_filename = "celerybeat-schedule"
        super().setup_schedule()
