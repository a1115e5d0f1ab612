"""Webhook delivery (issue 43): sign, POST, log, retry; and the watch that turns a
project's states into events. No Celery here (``workers/hooks.py`` wraps it), no hot path:
it runs in the worker process serving ``<queue>.hooks`` only.

The outbox (:mod:`labelq.record.hooks`): every event is a ``hook_event`` row, ``pending``
until delivered. Every beat, :func:`sweep` runs :func:`watch` (conditions: finished,
stalled, budget below, gold seen through), then claims the pending events that are due
(:func:`claim_due`: their ``next_at`` pushed :data:`CLAIM_S` ahead, so the next beat does
not enqueue them again) and the task enqueues one delivery each. :func:`deliver` POSTs the
body once, logs the attempt (``hook_delivery``) and marks the event ``delivered`` (a 2xx
answer), due again after :func:`backoff` (anything else), or ``failed`` after
:data:`MAX_TRIES`. A worker that dies mid-delivery leaves the event pending: the beat
re-sends it after the claim lapses. Delivery is at least once: a receiver de-duplicates on
the event id (``X-Labelq-Delivery``).

At once, not at the next beat: a process that can send Celery tasks (a worker, the API,
an operator command) calls :func:`deliver_at_once` with its sender
(``workers.hooks.send_delivery``: to the hooks' queue of the event's database), and from
then on every event committed in that process is claimed right after its transaction
commits and its delivery sent (:func:`send_committed`); the beat's sweep stays the safety
net (an event whose send failed is due again when its claim lapses). This module stays
free of Celery: the sender is passed in.

The request: ``POST`` of the JSON body ``{"id", "type", "project", "at", "data"}`` with
``Content-Type: application/json``, ``X-Labelq-Event`` (the type), ``X-Labelq-Delivery``
(the event id, the same on every try), ``X-Labelq-Attempt``, ``X-Labelq-Timestamp`` (Unix
seconds when this try was sent) and ``X-Labelq-Signature: sha256=<hex HMAC-SHA256 of
"<timestamp>.<body>" under the hook's secret>`` (:func:`sign`; Stripe's scheme with
GitHub's header format): the timestamp is signed, so a receiver refuses a delivery
captured and replayed later (:func:`verify`, :data:`TOLERANCE_S`). Each try is signed
anew with its own time. Redirects are not followed (a 3xx is a failed try);
:data:`TIMEOUT_S` per request. Only to public addresses, unless the deployment allows more
(:mod:`labelq.hooknet`: the address is checked when the request is made, and the
connection goes to the address checked).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import event as sa_event
from sqlalchemy import update
from sqlalchemy.engine import Engine as SaEngine
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import col, select

from . import __version__
from .errors import InputError
from .hooknet import Network, post
from .record.db import database_id, session_scope
from .record.hooks import CONDITION_EVENTS, check_url, emit_to
from .record.models import Hook, HookDelivery, HookEvent, Project, as_utc, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

__all__ = ["sign", "verify", "TOLERANCE_S", "body_of", "deliver", "claim_due", "claim", "watch",
           "sweep", "backoff", "Attempt", "MAX_TRIES", "TIMEOUT_S", "CLAIM_S",
           "deliver_at_once", "send_committed", "DELIVER_TASK"]

log = logging.getLogger(__name__)

MAX_TRIES = 5        # tries of one event before it is marked failed
TIMEOUT_S = 5.0      # one request's timeout (connect and read)
CLAIM_S = 60.0       # an event enqueued for delivery is not enqueued again for this long
                     # (> TIMEOUT_S: a delivery that ran ends first; after it, a dead
                     # worker's event is sent again)
BACKOFF_S = 2.0      # the first retry's delay; each next one 5 times longer
BACKOFF_MAX_S = 300.0
TOLERANCE_S = 300.0  # verify(): a timestamp further than this from the receiver's clock is
                     # refused (Stripe's default window: five minutes)


def backoff(attempt: int) -> float:
    """Seconds before try ``attempt + 1`` after try ``attempt`` failed: 2, 10, 50, 250
    (at most :data:`BACKOFF_MAX_S`): five tries span about five minutes."""
    return float(min(BACKOFF_MAX_S, BACKOFF_S * 5 ** (attempt - 1)))


def sign(secret: str, body: bytes, timestamp: str | int) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``<timestamp>.<body>`` (the ``X-Labelq-Timestamp``
    header's text, a dot, the raw body) under the hook's ``secret``."""
    signed = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str, timestamp: str | int, *,
           tolerance: float = TOLERANCE_S, now: float | None = None) -> bool:
    """Whether ``signature`` (the ``X-Labelq-Signature`` header) signs ``body`` sent at
    ``timestamp`` (the ``X-Labelq-Timestamp`` header), and that time is within
    ``tolerance`` seconds of ``now`` (default: this clock): a delivery replayed later is
    refused, as is a timestamp that is not whole Unix seconds. Compared in constant time,
    as a receiver should."""
    text = str(timestamp).strip()
    if not text.isascii() or not text.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(text)) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body, text), signature)


def body_of(event: HookEvent, project: str) -> bytes:
    """The request body of ``event`` of project ``project`` (UTF-8 JSON)."""
    return json.dumps({"id": event.id, "type": event.type, "project": project,
                       "at": as_utc(event.created).isoformat(timespec="milliseconds"),
                       "data": event.payload},
                      separators=(",", ":"), ensure_ascii=False, default=str).encode()


@dataclass(frozen=True)
class Attempt:
    """One delivery try: the event, which try it was, the receiver's status (None: no
    answer) or the error, how long it took, and the event's state after it."""

    event: str
    type: str
    attempt: int
    status: int | None
    error: str | None
    duration_ms: float
    state: str


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float,
          allowed: Sequence[Network] = ()) -> tuple[int | None, str | None]:
    """POST ``body``; (status, None) on any HTTP answer, (None, why) on none — a refused
    address (:mod:`labelq.hooknet`) included."""
    try:  # (a URL stored before check_url refused it is a failed try, said as such)
        checked = check_url(url)
    except InputError as exc:
        return None, _plain_text(exc.message)
    try:
        return post(checked, body, headers, timeout, allowed), None
    except PermissionError as exc:
        return None, _plain_text(f"refused: {exc}")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return None, _plain_text(f"{type(exc).__name__}: {exc}")


def _plain_text(error: str) -> str:
    """``error`` (at most 2000 characters) with its control characters written as escapes
    (``\\x1b``): it may quote what the receiver sent (a garbled status line), and ``labelq
    hooks deliveries`` and the log print it to a terminal, which would run them."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode()
                   for c in error)[:2000]


def _origin(url: str) -> str:
    """``url`` as a log line shows it: scheme, host and port only. A receiver's URL often
    is its credential (a chat webhook's path, a token in the query, a user and password),
    and a worker's log is read by more people than hold the operator token; ``labelq
    hooks list`` shows the whole URL."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "(not a URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "") + "/..."


def deliver(engine: Engine, event_id: str, *, claim: str | None = None,
            timeout: float = TIMEOUT_S, allowed: Sequence[Network] = ()) -> Attempt | None:
    """Try to deliver event ``event_id`` once (None: no such event pending — delivered
    already, failed, or its hook removed — or ``claim`` given and no longer the event's:
    a message that waited in the queue past its claim, enqueued again since). The request
    runs outside any transaction. ``allowed``: the networks beyond the public addresses a
    delivery may go to (``LABELQ_HOOK_ALLOW_NETWORKS``, read by the caller)."""
    with session_scope(engine) as s:
        event = s.get(HookEvent, event_id)
        if event is None or event.state != "pending":
            return None
        if claim is not None and event.claim != claim:
            return None
        hook = s.get(Hook, event.hook_id)
        project = s.get(Project, event.project_id)
        if hook is None or project is None:
            return None
        body = body_of(event, project.name)
        url, attempt, kind, name = hook.url, event.attempts + 1, event.type, hook.name
        headers = {"Content-Type": "application/json",
                   "User-Agent": f"labelq-hooks/{__version__}",
                   "X-Labelq-Event": kind, "X-Labelq-Delivery": event.id,
                   "X-Labelq-Attempt": str(attempt)}
        secret = hook.secret
    # (signed at the try, not when the event was recorded: a retry 5 minutes later is
    # inside the receiver's window)
    stamp = str(int(time.time()))
    headers["X-Labelq-Timestamp"] = stamp
    headers["X-Labelq-Signature"] = sign(secret, body, stamp)
    start = time.monotonic()
    status, error = _post(url, body, headers, timeout, allowed)
    took = (time.monotonic() - start) * 1000.0
    ok = status is not None and 200 <= status < 300
    with session_scope(engine) as s:
        event = s.get(HookEvent, event_id)
        if event is None:  # its hook removed meanwhile
            return None
        s.add(HookDelivery(event_id=event_id, hook_id=event.hook_id, attempt=attempt,
                           status=status, error=error, duration_ms=took))
        if event.state == "pending":
            event.attempts = attempt
            if ok:
                event.state = "delivered"
            elif attempt >= MAX_TRIES:
                event.state = "failed"
            else:
                event.next_at = utcnow() + timedelta(seconds=backoff(attempt))
            s.add(event)
        state = event.state
    if not ok:
        log.warning("hook %r event %s (%s) to %s, try %d: %s%s", name, event_id, kind,
                    _origin(url), attempt, error or f"HTTP {status}",
                    "; no more tries" if state == "failed" else "")
    return Attempt(event_id, kind, attempt, status, error, took, state)


def claim_due(engine: Engine, limit: int = 200, now: datetime | None = None
              ) -> list[tuple[str, str]]:
    """The pending events due now (at most ``limit``, the oldest first), each claimed:
    its ``next_at`` moved :data:`CLAIM_S` ahead and a new ``claim`` token written, by an
    UPDATE that succeeds only while it is still due (two beats never both enqueue it).
    Returns (event id, token) pairs: the delivery message carries the token, so a message
    that outlived its claim (a queue backed up behind slow receivers) does nothing."""
    now = now or utcnow()
    with session_scope(engine) as s:
        due = s.exec(select(col(HookEvent.id))
                     .where(col(HookEvent.state) == "pending", col(HookEvent.next_at) <= now)
                     .order_by(col(HookEvent.next_at)).limit(limit)).all()
    return claim(engine, list(due), now)


def claim(engine: Engine, event_ids: list[str], now: datetime | None = None
          ) -> list[tuple[str, str]]:
    """Claim each of ``event_ids`` that is pending and due (:func:`claim_due`'s UPDATE):
    (event id, token) of those claimed."""
    now = now or utcnow()
    later = now + timedelta(seconds=CLAIM_S)
    claimed: list[tuple[str, str]] = []
    with session_scope(engine) as s:
        for event_id in event_ids:
            token = str(uuid.uuid4())
            done = s.connection().execute(
                update(HookEvent).where(col(HookEvent.id) == event_id,
                                        col(HookEvent.state) == "pending",
                                        col(HookEvent.next_at) <= now)
                .values(next_at=later, claim=token))
            if done.rowcount == 1:
                claimed.append((event_id, token))
    return claimed


DELIVER_TASK = "labelq.deliver_hook"  # its arguments: event id, database id, claim token
_EVENTS_KEY = "labelq_hook_events"  # Session.info: ids of the events flushed, not committed
_sender: Callable[[str, list[Any]], None] | None = None


def deliver_at_once(send_task: Callable[[str, list[Any]], None] | None) -> None:
    """From now on, in this process, the delivery of each hook event is sent as soon as
    the transaction that wrote it commits: ``send_task(DELIVER_TASK, [event id, database
    id, claim])`` (``None``: no more; the beat's sweep alone). The events are noted as
    sessions flush and sent after the commit (:func:`send_committed`); a rolled-back
    transaction sends nothing."""
    global _sender
    _sender = send_task
    if not sa_event.contains(OrmSession, "after_flush", _note_events):
        sa_event.listen(OrmSession, "after_flush", _note_events)
        sa_event.listen(OrmSession, "after_commit", _send_noted)
        sa_event.listen(OrmSession, "after_rollback", _forget_noted)


def _note_events(session: OrmSession, _flush: object) -> None:
    if _sender is None:
        return
    ids = [obj.id for obj in session.new if isinstance(obj, HookEvent)]
    if ids:
        session.info.setdefault(_EVENTS_KEY, []).extend(ids)


def _forget_noted(session: OrmSession) -> None:
    session.info.pop(_EVENTS_KEY, None)


def _send_noted(session: OrmSession) -> None:
    ids = session.info.pop(_EVENTS_KEY, None)
    if ids and _sender is not None:
        bind = session.get_bind()
        send_committed(bind if isinstance(bind, SaEngine) else bind.engine, ids, _sender)


def send_committed(engine: Engine, event_ids: list[str],
                   send_task: Callable[[str, list[Any]], None]) -> int:
    """Claim the committed events ``event_ids`` and send a delivery of each; how many were
    sent. Never raises: the caller's transaction has committed, and an event not sent
    now is sent by the beat's sweep once its claim lapses (logged)."""
    sent = 0
    try:
        database = database_id(engine)
        for event_id, token in claim(engine, event_ids):
            send_task(DELIVER_TASK, [event_id, database, token])
            sent += 1
    except Exception:  # noqa: BLE001 - the beat's sweep delivers it later
        log.exception("hook events %s: delivery not sent at once (the beat's sweep will)",
                      event_ids)
    return sent


def _conditions(session: Session, project: Project) -> dict[str, dict[str, Any]]:
    """The conditions that hold for ``project`` now (``budget.below`` without its share,
    applied per hook), each with the event's data."""
    from .record.stalls import stall_text
    from .reporting import status_report

    st = status_report(session, project)
    out: dict[str, dict[str, Any]] = {}
    if st["finished"]:
        out["project.finished"] = {"reason": st["finished"], "labels": st["labels"],
                                   "spent": st["spent"], "left": st["left"]}
    if st["state"] == "stalled" and st["stalled"]:
        stalled = st["stalled"]
        out["project.stalled"] = {"text": stall_text(stalled), "tasks": stalled["tasks"],
                                  "categories": stalled["categories"],
                                  "reasons": stalled["reasons"],
                                  "ways_out": stalled["ways_out"]}
    if project.budget:
        out["budget.below"] = {"budget": project.budget, "spent": st["spent"],
                               "left": st["left"],
                               "share_left": round(float(st["left"]) / project.budget, 6)}
    for w in st.get("gold_warnings") or []:
        out[f"gold.seen_through:{w['worker']}"] = dict(w)
    return out


def watch(engine: Engine) -> list[str]:
    """Emit the condition events (:data:`~labelq.record.hooks.CONDITION_EVENTS`) that
    started since the last watch, for each hook subscribed to them: once per onset (a
    condition that ends and starts again is announced again). Reads each such project's
    status (the counters; ``labelq status``'s reads), one transaction per project (one
    that fails is logged and does not hold the others back). Returns the event ids."""
    with session_scope(engine) as s:
        projects = sorted({h.project_id for h in s.exec(select(Hook)).all()
                           if set(h.events) & set(CONDITION_EVENTS)})
    emitted: list[str] = []
    for pid in projects:
        try:
            emitted += _watch_project(engine, pid)
        except Exception:  # noqa: BLE001 - logged; the next beat asks again
            log.exception("hooks: the conditions of project %s were not read", pid)
    return emitted


def _watch_project(engine: Engine, pid: int) -> list[str]:
    emitted: list[str] = []
    with session_scope(engine) as s:
        project = s.get(Project, pid)
        if project is None:
            return []
        project_hooks = [h for h in s.exec(select(Hook).where(col(Hook.project_id) == pid)
                                           .order_by(col(Hook.id))).all()
                         if set(h.events) & set(CONDITION_EVENTS)]
        held = _conditions(s, project)
        for h in project_hooks:
            now_on: dict[str, dict[str, Any]] = {}
            for key, data in held.items():
                kind = key.split(":", 1)[0]
                if kind not in h.events:
                    continue
                if kind == "budget.below":
                    if h.budget_below is None or data["share_left"] >= h.budget_below:
                        continue
                    data = {**data, "threshold": h.budget_below}
                now_on[key] = data
            for key in sorted(set(now_on) - set(h.fired)):
                emitted.append(emit_to(s, h, key.split(":", 1)[0], now_on[key]).id)
            if sorted(now_on) != sorted(h.fired):
                h.fired = sorted(now_on)
                s.add(h)
    return emitted


# one watch at a time in a process (the hooks process runs tasks in threads: two sweeps
# watching at once would both see a condition start and both announce it)
_WATCHING = threading.Lock()


def sweep(engine: Engine) -> tuple[list[str], list[tuple[str, str]]]:
    """One beat of the hooks: :func:`watch` (skipped while another thread of this process
    runs one), then :func:`claim_due`. Returns (events emitted, (event, claim) pairs: the
    caller enqueues a delivery of each)."""
    emitted: list[str] = []
    if _WATCHING.acquire(blocking=False):
        try:
            emitted = watch(engine)
        except Exception:  # noqa: BLE001 - the outbox still gets delivered
            log.exception("hooks: watching the projects' conditions failed")
        finally:
            _WATCHING.release()
    return emitted, claim_due(engine)
