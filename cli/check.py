"""``labelq check``: is this deployment ready — database, Redis, a Celery worker?"""

from __future__ import annotations

from typing import TypedDict

import click

from labelq.record.location import Location
from labelq.record.settings import load_settings

from ._common import DB_OPTION, OUTPUT_OPTION, REDIS_OPTION, Output, emit


class _Check(TypedDict):
    """One row of ``labelq check``."""

    check: str
    ok: bool
    detail: str


class _KeysCheck(_Check, total=False):
    """The Redis keys' row (without the counts when Redis could not be scanned)."""

    database: str | None
    keys: int
    other_databases: list[dict[str, str | int]]
    legacy_keys: int


class _ProjectCheck(_Check):
    """A project's row: only for a project that is stalled or holds gold it never serves
    (``ok``: the deployment can run; ``warning``: the operator has something to do)."""

    warning: bool
    state: str
    stalled: dict[str, object] | None
    gold_unscheduled: int


def _projects(url: str) -> list[_ProjectCheck]:
    """A row for each project with open tasks no active annotator can serve (the state
    ``labelq status`` prints, with the ways out), gold questions and no gold schedule, or
    suggestions shown where gold lacks a model's prediction more often than tasks."""
    from sqlmodel import select

    from labelq.record.db import engine_for, session_scope
    from labelq.record.models import Project
    from labelq.record.stalls import stall_text
    from labelq.reporting import gold_unscheduled, project_status, suggestion_warnings

    rows: list[_ProjectCheck] = []
    with session_scope(engine_for(url)) as s:
        for project in s.exec(select(Project).order_by(Project.name)).all():
            st = project_status(s, project)
            said = []
            if st["stalled"] is not None:
                said.append(f"{stall_text(st['stalled'])}; ways out: "
                            + "; ".join(st["stalled"]["ways_out"]))
            said += gold_unscheduled(st)
            said += suggestion_warnings(s, project)
            if said:
                rows.append({"check": f"project {project.name}", "ok": True, "warning": True,
                             "detail": " | ".join(said), "state": st["state"],
                             "stalled": st["stalled"],
                             "gold_unscheduled": st["gold_unscheduled"]})
    return rows


def _database(url: str, location: Location | None = None) -> tuple[bool, str]:
    from pathlib import Path

    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url

    from labelq.errors import LabelqError
    from labelq.record.db import engine_for, masked_url
    from labelq.record.location import check_sqlite_file, refuse_memory
    shown = masked_url(url)
    try:
        parsed = make_url(url)
    except Exception as exc:  # noqa: BLE001
        return False, f"{shown}: {exc}"
    where = location or Location(url, "given")
    try:  # (an in-memory database: said, nothing made)
        refuse_memory(where)
    except LabelqError as exc:
        return False, str(exc).replace(f" (from {where.source})", "")
    file = parsed.database
    if parsed.get_backend_name() == "sqlite" and file and file != ":memory:" \
            and not Path(file).exists():
        return False, f"{shown}: no such database file (run labelq init)"  # (not created here)
    try:  # (a file that is not labelq's: said, nothing written)
        check_sqlite_file(where, creating=False)
    except LabelqError as exc:
        return False, str(exc).replace(f" (from {where.source})", "")
    try:
        eng = engine_for(url)
        with eng.connect() as conn:
            tables = set(inspect(conn).get_table_names())
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return False, f"{shown}: {str(exc).splitlines()[0]}"
    from sqlmodel import SQLModel

    import labelq.record.models  # noqa: F401 - registers the tables

    missing = set(SQLModel.metadata.tables) - tables
    if missing:
        return False, f"{shown}: no tables {', '.join(sorted(missing))} (run labelq init)"
    from labelq.record.db import database_id
    try:
        return True, f"{shown}, database id {database_id(eng)}"
    except Exception as exc:  # noqa: BLE001 - no identity yet: an earlier labelq's database
        return False, str(exc)


def _own_database(url: str) -> str | None:
    """This database's id (``None``: unreadable, said by the database row)."""
    from labelq.record.db import database_id, engine_for
    try:
        return database_id(engine_for(url))
    except Exception:  # noqa: BLE001 - the database row has said why
        return None


def _redis(url: str) -> tuple[bool, str]:
    import redis

    from labelq.live.redis.connect import connect

    try:
        info = connect(url, socket_timeout=5).info("server")
    except redis.RedisError as exc:
        return False, f"{url}: {exc}"
    return True, f"{url} (Redis {info.get('redis_version', '?')})"


def _keys(rd: str, db: str) -> _KeysCheck:
    """The hot state's keys on this Redis database, by the SQL database they belong to
    (``labelq.live.redis.keys.parse_key``): this one's, other databases' (counted and
    named, never touched) and keys of a labelq before keys named their database."""
    import redis

    from labelq.live.redis.connect import connect
    from labelq.live.redis.keys import parse_key
    from labelq.record.db import database_id, engine_for

    try:
        own: str | None = database_id(engine_for(db))
    except Exception:  # noqa: BLE001 - the database row has said why
        own = None
    counts: dict[str | None, int] = {}
    try:
        client = connect(rd, socket_timeout=5)
        for key in client.scan_iter(match="lq:*", count=1000):
            owner = parse_key(key)
            if owner is not None:
                counts[owner.database] = counts.get(owner.database, 0) + 1
    except redis.RedisError as exc:
        return {"check": "redis keys", "ok": False, "detail": f"not counted: {exc}"}
    others = sorted((d, n) for d, n in counts.items() if d is not None and d != own)
    legacy = counts.get(None, 0)
    parts = [f"this database ({own or 'unknown'}): {counts.get(own, 0) if own else 0} keys"]
    if others:
        parts.append(f"{len(others)} other database{'s share' if len(others) > 1 else ' shares'} "
                     "this Redis database (their keys are left alone): "
                     + ", ".join(f"{d} ({n} key{'' if n == 1 else 's'})" for d, n in others)
                     + "; each database's workers serve its own queue (LABELQ_CELERY_QUEUE unset)")
    if legacy:
        parts.append(f"{legacy} keys of an earlier labelq (no database id: lq:P:...; "
                     "unused now, `labelq rebuild` rebuilds this database's under its id)")
    return {"check": "redis keys", "ok": True, "detail": "; ".join(parts),
            "database": own, "keys": counts.get(own, 0) if own else 0,
            "other_databases": [{"database": d, "keys": n} for d, n in others],
            "legacy_keys": legacy}


def _home(rd: str, db: str) -> _Check:
    """Whether this database is the home of its identity on this Redis (``labelq.live.
    home``): a copy of another database, or a moved one, fails here (read only: nothing
    is claimed)."""
    import redis

    from labelq.errors import LabelqError
    from labelq.live.home import home_status
    from labelq.live.redis.connect import connect
    from labelq.record.db import engine_for
    try:
        status = home_status(engine_for(db), connect(rd, socket_timeout=5))
    except (LabelqError, redis.RedisError) as exc:
        return {"check": "database home", "ok": False, "detail": str(exc)}
    return {"check": "database home", "ok": status.state in ("home", "unclaimed"),
            "detail": status.message}


class _WorkerCheck(_Check, total=False):
    """The Celery workers' row: what each worker on the broker serves."""

    warning: bool
    database: str | None
    queue: str | None
    workers: list[dict[str, object]]


def _served(url: str, timeout: float) -> dict[str, dict[str, object]]:
    """What each Celery worker on the broker says it serves (:mod:`workers.serving`):
    worker name -> {database, queue, consumes}; a worker of an earlier labelq, which does
    not know the command, with ``database`` None and the queues it consumes."""
    from workers.main import create_app
    from workers.serving import COMMAND

    replies: dict[str, object] = {}
    for reply in create_app(url).control.broadcast(COMMAND, reply=True,
                                                   timeout=timeout) or []:
        replies.update(reply)
    out: dict[str, dict[str, object]] = {}
    for name, reply in replies.items():
        if isinstance(reply, dict) and "error" not in reply:
            out[name] = reply
    earlier = sorted(set(replies) - set(out))
    if earlier:
        queues = create_app(url).control.inspect(timeout=timeout,
                                                 destination=earlier).active_queues() or {}
        for name in earlier:
            out[name] = {"database": None, "queue": None,
                         "consumes": sorted(str(q.get("name")) for q in queues.get(name, []))}
    return out


def _workers(url: str, timeout: float, database: str | None, queue: str | None,
             long_queue: str | None = None, hooks_queue: str | None = None) -> _WorkerCheck:
    """The row of the Celery workers: each named with the database it serves. ``ok``
    when a worker of this database consumes its queue and no worker of another database
    (or one that does not say which) takes messages off that queue; a worker of this
    database on another queue is flagged (a warning), but for ``run-worker``'s helpers on
    its long work and webhooks queues (``long_queue``, ``hooks_queue``)."""
    from labelq.record.settings import LEGACY_QUEUE

    try:
        served = _served(url, timeout)
    except Exception as exc:  # noqa: BLE001 - broker unreachable and the like
        return {"check": "celery worker", "ok": False,
                "detail": f"no answer: {str(exc).splitlines()[0]}"}
    good, bad, flagged, others, helpers = [], [], [], [], []
    listed: list[dict[str, object]] = []
    for name in sorted(served):
        info = served[name]
        db = info.get("database")
        consumes = [str(q) for q in info.get("consumes") or []]  # type: ignore[attr-defined]
        on_ours = queue is not None and queue in consumes
        shown = ", ".join(consumes) or "no queue"
        if db is not None and db == database and on_ours:
            verdict = "serves this database"
            good.append(f"{name} (database {db}, queue {queue})")
        elif on_ours:
            who = f"database {db}" if db is not None else \
                "a database it does not say (a worker of an earlier labelq)"
            verdict = "serves another database on this database's queue"
            bad.append(f"{name} serves {who} but consumes this database's queue {queue}: "
                       "it takes this database's wake-ups and applies none of them")
        elif db is not None and db == database and consumes and all(
                q is not None and q in (long_queue, hooks_queue) for q in consumes):
            # run-worker's own helpers: the exports' and the webhooks' processes
            verdict = "serves this database's " + (
                "exports" if consumes == [long_queue] else
                "webhooks" if consumes == [hooks_queue] else "exports and webhooks")
            helpers.append(f"{name} ({verdict[len('serves this database') + 3:]})")
        elif db is not None and db == database:
            verdict = "serves this database on another queue"
            flagged.append(f"{name} serves this database but consumes {shown}, not "
                           f"{queue} (where its wake-ups go: LABELQ_CELERY_QUEUE differs "
                           "between that worker and here; restart it with the same)")
        elif db is None and LEGACY_QUEUE in consumes:
            verdict = "serves the shared legacy queue"
            flagged.append(f"{name} consumes the shared queue {LEGACY_QUEUE!r} and does not "
                           "say which database it serves (a worker of an earlier labelq: "
                           "restart it with this one, which serves its database's own queue)")
        else:
            verdict = "serves another database"
            others.append(f"{name} (database {db or 'not said'}, {shown})")
        listed.append({"worker": name, "database": db, "consumes": consumes,
                       "verdict": verdict})
    parts = []
    if good:
        parts.append("serving this database: " + ", ".join(good + helpers))
    else:
        parts.append(f"no Celery worker of this database ({database or 'unknown'}) consumes "
                     f"its queue {queue!r} on this broker (asked for {timeout:g} s): labels "
                     "are recorded but not applied; start `labelq run-worker`")
    parts += bad + flagged
    if others:
        parts.append("other databases' workers (left alone): " + ", ".join(others))
    row: _WorkerCheck = {"check": "celery worker", "ok": bool(good) and not bad,
                         "detail": "; ".join(parts), "database": database, "queue": queue,
                         "workers": listed}
    if flagged and row["ok"]:
        row["warning"] = True
    return row


class _HooksCheck(_Check, total=False):
    """The webhooks' row (only for a database with hooks): who delivers them."""

    warning: bool
    hooks: int
    projects: list[str]
    queue: str | None
    workers: list[str]


def _hooks(url: str) -> tuple[int, list[str]]:
    """How many webhooks this database has, and the projects that have them."""
    from sqlmodel import col, select

    from labelq.record.db import engine_for, session_scope
    from labelq.record.models import Hook, Project

    with session_scope(engine_for(url)) as s:
        rows = s.exec(select(Project.name)
                      .join(Hook, col(Hook.project_id) == col(Project.id))).all()
    return len(rows), sorted(set(rows))


def _hooks_worker(url: str, workers: _WorkerCheck, database: str | None,
                  hooks_queue: str | None) -> _HooksCheck | None:
    """The row saying whether a worker of this database consumes its webhooks' queue
    (``hooks_queue``: ``<queue>.hooks``; ``run-worker``'s hooks process), from what the
    workers' row heard; ``None`` when the database has no hook (nothing to deliver).
    Without such a worker, events pile up in the outbox, undelivered: a warning, not a
    failure (labels are applied without it)."""
    n, projects = _hooks(url)
    if n == 0:
        return None
    which = (f"{n} webhook{'s' if n > 1 else ''} (project{'s' if len(projects) > 1 else ''} "
             f"{', '.join(projects)})")
    row: _HooksCheck = {"check": "webhooks worker", "ok": True, "detail": which,
                        "hooks": n, "projects": projects, "queue": hooks_queue,
                        "workers": []}
    if "workers" not in workers:  # (no answer from the broker: said by that row)
        row["warning"] = True
        row["detail"] = f"{which}; not checked: the Celery workers did not answer"
        return row
    ours: list[str] = []
    others: list[str] = []
    for w in workers["workers"]:
        consumes = w.get("consumes") or []
        if hooks_queue is None or hooks_queue not in consumes:  # type: ignore[operator]
            continue
        (ours if w.get("database") == database else others).append(str(w["worker"]))
    row["workers"] = ours
    if ours:
        row["detail"] = (f"{which}: delivered by {', '.join(ours)} (queue {hooks_queue}; "
                         "with the beat of `run-worker`)")
        return row
    row["warning"] = True
    row["detail"] = (f"{which}, but no Celery worker of this database consumes its "
                     f"webhooks' queue {hooks_queue!r}: events wait in the outbox, "
                     "undelivered; start `labelq run-worker` (without --no-hooks), or "
                     f"`celery -A workers.main worker -P threads -c 4 -Q {hooks_queue}`")
    if others:
        row["detail"] += (f" ({', '.join(others)} consume{'s' if len(others) == 1 else ''} "
                          "it for another database)")
    return row


@click.command("check")
@DB_OPTION
@REDIS_OPTION
@click.option("--timeout", type=float, default=2.0, show_default=True,
              help="Seconds to wait for Celery workers to answer.")
@OUTPUT_OPTION
def check(database_url: str | None, redis_url: str | None, timeout: float,
          output: Output) -> None:
    """Check that this deployment can run: the database (and its schema), Redis, and a
    Celery worker of this database answering on the broker (without one, labels are
    recorded but never applied). Each worker is named with the database it serves; one of
    another database on this database's queue fails the check, one of this database on
    another queue (or an earlier labelq's on the shared queue) is a warning; so is a
    database with webhooks and no worker of it on its webhooks' queue. Exit code 9
    when a check fails. Projects that are stalled (open tasks no
    active annotator can serve) or hold gold without a gold schedule get a WARN row each
    (not a failure)."""
    from labelq.record.location import locate
    from labelq.record.settings import Settings

    settings = load_settings()
    location = locate(database_url)  # where every other command would look
    db = Settings(database_url=location.url).sqlalchemy_url
    rd = redis_url or settings.redis_url
    rows: list[_Check] = []
    for what, (ok, detail) in (("database", _database(db, location)), ("redis", _redis(rd))):
        rows.append({"check": what, "ok": ok, "detail": detail})
    rows[0]["detail"] = f"{rows[0]['detail']} (from {location.source})"
    if rows[1]["ok"]:
        own = _own_database(db) if rows[0]["ok"] else None
        queue = settings.celery_queue or (settings.queue_of(own) if own else None)
        # (with LABELQ_CELERY_QUEUE set the database is no part of the names)
        long_queue, hooks_queue = (settings.long_queue_of(own or ""),
                                   settings.hooks_queue_of(own or "")) if queue else (None, None)
        workers = _workers(rd, timeout, own, queue, long_queue, hooks_queue)
        rows.append(workers)
        if rows[0]["ok"]:
            hooks_row = _hooks_worker(db, workers, own, hooks_queue)
            if hooks_row is not None:
                rows.append(hooks_row)
    else:
        rows.append({"check": "celery worker", "ok": False,
                     "detail": "not checked: Redis (the broker) does not answer"})
    if rows[1]["ok"]:
        rows.append(_keys(rd, db))
        if rows[0]["ok"]:
            rows.append(_home(rd, db))
    rows.append({"check": "operator token", "ok": True,
                 "detail": "set" if settings.operator_token else
                 "unset: the API's operator endpoints are disabled"})
    if rows[0]["ok"]:
        rows.extend(_projects(db))
    emit(rows if output == "json" else
         [{"check": r["check"], "detail": r["detail"],
           "ok": "FAIL" if not r["ok"] else "WARN" if r.get("warning") else "ok"}
          for r in rows], output, columns=["check", "ok", "detail"])
    if not all(r["ok"] for r in rows):
        raise click.exceptions.Exit(9)


commands = [check]
