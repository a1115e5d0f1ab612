"""Annotator endpoints, under ``/api/v1``; every one needs the annotator's bearer token.

=======  ==================================  =============================================
method   path                                does
=======  ==================================  =============================================
GET      /me                                 who am I: handle, project, label set and
                                             its display names, the instructions
GET      /me/progress                        labels given, gold stats, capacity left
POST     /assignments/next                   issue my next assignment (or none)
GET      /assignments/current                the assignments I hold now (issued, not yet
                                             answered, declined or expired)
POST     /assignments/{id}/label             record my label (idempotent on replay);
                                             ``?next=true``: and get my next assignment
POST     /assignments/{id}/decline           give the assignment back
=======  ==================================  =============================================
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ..record.db import session_scope
from ..record.models import Worker, utc_from_ms
from .auth import Annotator, current_annotator
from .current import open_assignments
from .errors import ERROR_RESPONSES
from .progress import worker_progress
from .schemas import (
    Assignment,
    AssignmentId,
    CurrentOut,
    DeclineOut,
    MeOut,
    NextOut,
    ProgressOut,
    SubmitIn,
    SubmitOut,
)

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["annotator"], responses=ERROR_RESPONSES)
_404 = {404: ERROR_RESPONSES[401] | {"description": "No live assignment with this id."}}
_409 = {409: ERROR_RESPONSES[401] | {"description": "Conflicts with the current state: "
                                                    "another label already recorded, budget "
                                                    "exhausted, being submitted."}}
_410 = {410: ERROR_RESPONSES[401] | {"description": "The lease expired (`lease_expired`), or "
                                                    "was lost with Redis and its task no "
                                                    "longer takes the label (`lease_lost`): "
                                                    "not saved (`recorded: false`)."}}

AssignmentPath = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
                      description="The assignment id the next call returned.")


def _runtime(request: Request):
    return request.app.state.labelq


@router.get("/me", response_model=MeOut, summary="Who am I")
def me(who: Annotator = Depends(current_annotator)) -> MeOut:
    w = who.worker
    return MeOut(handle=w.handle, project=who.project.name, status=w.status,
                 labels=list(who.project.labels),
                 label_names=who.project.display_names(),
                 instructions=who.project.instructions, capacity=w.capacity,
                 categories=list(w.categories or []))


@router.get("/me/progress", response_model=ProgressOut, summary="My progress")
def progress(request: Request, who: Annotator = Depends(current_annotator)) -> ProgressOut:
    rt = _runtime(request)
    with session_scope(rt.engine) as session:
        worker = session.get(Worker, who.worker.id)
        return ProgressOut(**worker_progress(session, rt.redis, worker))


@router.post("/assignments/next", response_model=NextOut, summary="My next assignment",
             responses=_409)
async def next_assignment(request: Request,
                          who: Annotator = Depends(current_annotator)) -> Response:
    """Reserve the next task the project's policy picks for me. The lease lasts
    ``LABELQ_LEASE_SECONDS``; asking again while I hold it returns it again (same id and
    expiry; up to ``LABELQ_MAX_OPEN`` open assignments at once, 1 by default)."""
    return _json(await run_in_threadpool(next_body, _runtime(request).service, who))


@router.get("/assignments/current", response_model=CurrentOut,
            summary="The assignments I hold")
def current(request: Request, who: Annotator = Depends(current_annotator)) -> CurrentOut:
    """What I hold now: issued to me, not yet answered, declined or expired (at most
    ``LABELQ_MAX_OPEN``, 1 by default), oldest first. Reading it issues nothing (``POST
    /assignments/next`` returns the held one again, or a new one when I hold none)."""
    rt = _runtime(request)
    with session_scope(rt.engine) as session:
        held = open_assignments(session, rt.service.scripts, who.worker, who.project)
    return CurrentOut(assignments=[Assignment(**a) for a in held])


def _next_body(issued, who: Annotator, service) -> dict[str, Any]:
    """``NextOut`` as a plain dict (every field, as FastAPI would have serialised it)."""
    if issued is None:
        return {"assignment": None, "message": service.idle_reason(who.handle)}
    return {"assignment": {
        "assignment_id": issued.assignment_id, "category": issued.category,
        "payload": issued.payload, "labels": list(who.project.labels),
        "expires_ms": issued.expires_ms,
        "expires_at": utc_from_ms(issued.expires_ms).isoformat()}, "message": None}


def next_body(service, who: Annotator) -> dict[str, Any]:
    """``POST /assignments/next``'s answer (blocking: call it in the thread pool)."""
    return _next_body(service.next_assignment(who.handle), who, service)


def submit_body(service, who: Annotator, assignment_id: str, label: str,
                then_next: bool) -> dict[str, Any]:
    """``POST /assignments/{id}/label``'s answer (blocking: call it in the thread pool)."""
    return submit_answer(service.submit(who.handle, assignment_id, label,
                                        then_next=then_next), who, service, then_next)


def complete_body(service, who: Annotator, job, outcome, then_next: bool) -> dict[str, Any]:
    """:func:`submit_body` for a submit whose batch the hot path's committer ran
    (blocking: call it in the thread pool)."""
    return submit_answer(service.submitter.complete(job, outcome), who, service, then_next)


def submit_answer(out: dict[str, Any], who: Annotator, service,
                  then_next: bool) -> dict[str, Any]:
    """``SubmitOut`` as a plain dict from the service's answer (with ``then_next`` and no
    next assignment, the reason is read from Redis: blocking)."""
    return {"assignment_id": out["assignment_id"], "label": out["label"],
            "duplicate": out["duplicate"],
            "next": _next_body(out.get("next"), who, service) if then_next else None}


def issued_body(issued, who: Annotator) -> dict[str, Any]:
    """``NextOut`` of an issued assignment (no I/O)."""
    return _next_body(issued, who, None)


def json_bytes(body: Any) -> bytes:
    """``body`` as compact UTF-8 JSON: orjson (a tenth of ``json.dumps``' time on these
    answers), else — a value orjson does not take, such as an integer beyond 64 bits in a
    payload — the standard library, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _json(body: dict[str, Any]) -> Response:
    return Response(json_bytes(body), media_type="application/json")


@router.post("/assignments/{assignment_id}/label", response_model=SubmitOut,
             summary="Submit my label", responses=_404 | _409 | _410)
async def submit(body: SubmitIn, request: Request, assignment_id: AssignmentId = AssignmentPath,
                 who: Annotator = Depends(current_annotator),
                 next: bool = Query(False, description="Also issue my next assignment, in "
                                                       "the same request.")) -> Response:
    """Record the label; it is durable when this answers 200. Sending the same label again
    answers 200 with ``duplicate: true``; a different one, 409 ``duplicate_submission``.
    With ``?next=true`` the answer also carries my next assignment (``next``), as
    ``POST /assignments/next`` would give it — one request per label instead of two."""
    # blocking (the group commit waits for SQL): in the thread pool, one hop
    return _json(await run_in_threadpool(submit_body, _runtime(request).service, who,
                                         assignment_id, body.label, next))


@router.post("/assignments/{assignment_id}/decline", response_model=DeclineOut,
             summary="Decline an assignment", responses=_404 | _409)
def decline(request: Request, assignment_id: AssignmentId = AssignmentPath,
            who: Annotator = Depends(current_annotator)) -> DeclineOut:
    """Give the assignment back; the task returns to the pool for others."""
    return DeclineOut(**_runtime(request).service.decline(who.handle, assignment_id))
