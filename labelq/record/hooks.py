"""Webhooks in the durable record (issue 43): a project's hooks, the outbox of their
events, and the log of delivery attempts.

An event is written by :func:`emit` in the caller's transaction — the one that pauses an
annotator (:mod:`labelq.record.pauses`), resumes one (:func:`labelq.record.projects.
set_worker_status`), finishes an export job (:mod:`labelq.jobs`) — one :class:`HookEvent`
row per hook of the project subscribed to its type (the outbox pattern: the event exists
if and only if the change was committed). Conditions that are not one transaction's
change (a project finished or stalled, the budget below a share, an annotator near the end
of the gold pool) are found by :func:`labelq.hooks.watch`, in the beat, and emitted once
per onset (:attr:`Hook.fired`). Delivery (HTTP, signing, retries) is :mod:`labelq.hooks`;
the Celery task that runs it is ``workers/hooks.py``.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete
from sqlmodel import Session, col, select

from ..errors import AlreadyExists, InputError, NotFound
from .models import Hook, HookDelivery, HookEvent, Project, utcnow

__all__ = ["EVENTS", "CONDITION_EVENTS", "add_hook", "get_hook", "list_hooks", "remove_hook",
           "emit", "emit_to", "export_ready", "check_url", "default_name", "parse_events", "hook_view", "deliveries",
           "delete_project_hooks"]

# the events a hook can subscribe to, and what each says (docs/hooks.md)
EVENTS: dict[str, str] = {
    "project.finished": "no label will be asked for again (budget spent, every task at "
                        "its cap)",
    "project.stalled": "open tasks remain but no active annotator can serve any",
    "annotator.paused": "an annotator was paused (quality rule or operator)",
    "annotator.resumed": "a paused annotator was resumed",
    "budget.below": "the budget left fell below the hook's --budget-below share",
    "export.ready": "an export job finished; its file can be fetched",
    "gold.seen_through": "an annotator has seen (nearly) every gold question",
}
# events found by the beat's watch (a state, not one transaction's change)
CONDITION_EVENTS = ("project.finished", "project.stalled", "budget.below",
                    "gold.seen_through")
# sent by ``labelq hooks test`` only (to one hook, whatever it subscribes to)
PING = "ping"


def check_url(url: str) -> str:
    """``url`` if it is an http or https URL with a host; else :class:`InputError` naming
    the field (a ``file://``, ``ftp://`` or ``gopher://`` URL would make the worker read
    or reach what it should not)."""
    bad = [c for c in url.strip() if c.isspace() or not c.isprintable()]
    if bad:
        raise InputError(f"hook URL {url!r} holds {bad[0]!r}: spaces and control "
                         "characters are percent-encoded in a URL (%20)", field="url")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - (raises on a port that is not one)
    except ValueError as exc:
        raise InputError(f"hook URL {url!r} is not a URL: {exc}", field="url") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InputError(f"hook URL {url!r} is not http or https (scheme "
                         f"{parts.scheme or 'missing'!r}); only http:// and https:// URLs "
                         "are delivered to", field="url")
    if not parts.hostname:
        raise InputError(f"hook URL {url!r} has no host", field="url")
    return url.strip()


def parse_events(values: list[str] | tuple[str, ...]) -> list[str]:
    """The event types named (comma-separated, repeatable; ``all``: every one but
    ``budget.below``, which ``--budget-below`` adds), in the order of :data:`EVENTS`;
    :class:`InputError` on an unknown one."""
    names = {n.strip() for v in values for n in v.split(",") if n.strip()}
    if not names:
        raise InputError("name at least one event (--events), e.g. --events "
                         "project.finished,annotator.paused; or --events all",
                         field="events")
    if "all" in names:
        names = (names - {"all"}) | (set(EVENTS) - {"budget.below"})
    unknown = sorted(names - set(EVENTS))
    if unknown:
        raise InputError(f"unknown event{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(unknown)}; choose from {', '.join(EVENTS)} (or all)",
                         field="events")
    return [e for e in EVENTS if e in names]


def add_hook(session: Session, project: Project, name: str, url: str, events: list[str],
             budget_below: float | None = None) -> tuple[Hook, str]:
    """Add hook ``name`` to ``project``; returns it and its secret (shown once by the CLI;
    stored, since signing needs it). ``budget_below`` (a share of the budget, in (0, 1))
    is required with ``budget.below`` and implies it."""
    url = check_url(url)
    if not name or len(name) > 100:
        raise InputError("a hook's name is 1 to 100 characters", field="name")
    if budget_below is not None:
        if not 0.0 < budget_below < 1.0:
            raise InputError(f"--budget-below is a share of the budget, in (0, 1); got "
                             f"{budget_below}", field="budget_below")
        if project.budget is None:
            raise InputError(f"project {project.name!r} has no budget: budget.below "
                             "cannot fire", field="budget_below")
        if "budget.below" not in events:
            events = [e for e in EVENTS if e in {*events, "budget.below"}]
    elif "budget.below" in events:
        raise InputError("event budget.below needs --budget-below FRACTION (e.g. 0.2: "
                         "fired when less than 20 % of the budget is left)",
                         field="budget_below")
    if session.exec(select(Hook).where(col(Hook.project_id) == project.id,
                                       col(Hook.name) == name)).first() is not None:
        raise AlreadyExists(f"project {project.name!r} has a hook named {name!r} already",
                            hook=name)
    secret = secrets.token_hex(32)
    assert project.id is not None, "a project read from the database has its id"
    hook = Hook(project_id=project.id, name=name, url=url, events=list(events),
                secret=secret, budget_below=budget_below)
    session.add(hook)
    session.flush()
    return hook, secret


def default_name(session: Session, project: Project, url: str) -> str:
    """A hook's name when none is given: the URL's host, made unique in the project
    (``example.com``, ``example.com-2``, ...)."""
    taken = {h.name for h in list_hooks(session, project)}
    base = urlsplit(url.strip()).hostname or "hook"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def get_hook(session: Session, project: Project, name: str) -> Hook:
    hook: Hook | None = session.exec(select(Hook).where(
        col(Hook.project_id) == project.id, col(Hook.name) == name)).first()
    if hook is None:
        raise NotFound(f"project {project.name!r} has no hook named {name!r}", hook=name)
    return hook


def list_hooks(session: Session, project: Project) -> list[Hook]:
    return list(session.exec(select(Hook).where(col(Hook.project_id) == project.id)
                             .order_by(col(Hook.id))))


def hook_view(session: Session, hook: Hook) -> dict[str, Any]:
    """A hook as ``hooks list`` shows it (never its secret), with its outbox's counts."""
    from sqlalchemy import func
    counts = dict(session.exec(select(col(HookEvent.state), func.count())
                               .where(col(HookEvent.hook_id) == hook.id)
                               .group_by(col(HookEvent.state))).all())
    return {"name": hook.name, "url": hook.url, "events": list(hook.events),
            "budget_below": hook.budget_below,
            "created": hook.created.isoformat(timespec="seconds"),
            "pending": int(counts.get("pending", 0)),
            "delivered": int(counts.get("delivered", 0)),
            "failed": int(counts.get("failed", 0))}


def remove_hook(session: Session, hook: Hook) -> None:
    """Delete ``hook`` with its events and their delivery log."""
    session.exec(delete(HookDelivery).where(col(HookDelivery.hook_id) == hook.id))
    session.exec(delete(HookEvent).where(col(HookEvent.hook_id) == hook.id))
    session.delete(hook)
    session.flush()


def delete_project_hooks(session: Session, project_id: int) -> None:
    """Delete every hook of project ``project_id`` (``project delete``)."""
    session.exec(delete(HookDelivery).where(col(HookDelivery.hook_id).in_(
        select(col(Hook.id)).where(col(Hook.project_id) == project_id))))
    session.exec(delete(HookEvent).where(col(HookEvent.project_id) == project_id))
    session.exec(delete(Hook).where(col(Hook.project_id) == project_id))


def emit(session: Session, project_id: int, type_: str, data: dict[str, Any]
         ) -> list[HookEvent]:
    """Record event ``type_`` with ``data`` for every hook of the project subscribed to
    it, in the caller's transaction (one SELECT when the project has no hook)."""
    if type_ not in EVENTS:
        raise ValueError(f"unknown hook event {type_!r}")
    hooks = session.exec(select(Hook).where(col(Hook.project_id) == project_id)).all()
    return [emit_to(session, h, type_, data) for h in hooks if type_ in h.events]


def export_ready(session: Session, project_id: int, *, file: str, fmt: str, raw: bool,
                 rows: int, method: str | None, chosen: str | None, job: str | None = None
                 ) -> list[HookEvent]:
    """Record ``export.ready`` for the file ``file`` just written (``rows`` rows): by an
    export job (``job``: its id, fetched at ``result_url``) or by ``labelq export --out``
    in the foreground (``job`` and ``result_url`` None: the file is on the machine that
    ran it). Called after the file is in place, so the event exists only for a file that
    does."""
    return emit(session, project_id, "export.ready",
                {"job": job, "format": fmt, "raw": raw, "method": method, "chosen": chosen,
                 "rows": rows, "file": file,
                 "result_url": None if job is None else f"/api/v1/exports/{job}/result"})


def emit_to(session: Session, hook: Hook, type_: str, data: dict[str, Any]) -> HookEvent:
    """Record event ``type_`` for ``hook`` alone (the ping of ``hooks test``, a
    condition the watch found)."""
    assert hook.id is not None, "a hook read from the database has its id"
    now = utcnow()
    event = HookEvent(id=str(uuid.uuid4()), hook_id=hook.id, project_id=hook.project_id,
                      type=type_, payload=dict(data), created=now, next_at=now)
    session.add(event)
    session.flush()
    return event


def deliveries(session: Session, hook: Hook, limit: int = 50) -> list[dict[str, Any]]:
    """The latest ``limit`` delivery attempts of ``hook``, newest first."""
    rows = session.exec(
        select(HookDelivery, HookEvent)
        .join(HookEvent, col(HookEvent.id) == col(HookDelivery.event_id))
        .where(col(HookDelivery.hook_id) == hook.id)
        .order_by(col(HookDelivery.id).desc()).limit(limit)).all()
    return [{"event": e.id, "type": e.type, "attempt": d.attempt, "status": d.status,
             "error": d.error, "duration_ms": round(d.duration_ms, 1),
             "at": d.at.isoformat(timespec="seconds"), "state": e.state}
            for d, e in rows]
