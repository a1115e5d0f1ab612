"""Annotator endpoints, under ``/api/v1``; every one needs the annotator's bearer token.

=======  ==================================  =============================================
method   path                                does
=======  ==================================  =============================================
GET      /me/projects                        the projects I am enrolled in, and the one a
                                             request naming none works in
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

Every endpoint but ``/me/projects`` works in one of my projects: the one ``?project=NAME``
names, else my only one, else the default my operator set (else 422, naming them).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ..errors import NotFound
from ..live.assign import Issued
from ..live.submit import Submitted
from ..record.db import session_scope
from ..record.models import Worker, utc_from_ms
from .auth import Annotator, Person, current_annotator, current_person
from .current import open_assignments
from .errors import ERROR_RESPONSES
from .progress import worker_progress
from .schemas import (
    AssignmentId,
    CurrentOut,
    DeclineOut,
    MeOut,
    MyProject,
    MyProjectsOut,
    NextOut,
    ProgressOut,
    SubmitIn,
    SubmitOut,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Service
    from .runtime import Runtime

__all__ = ["router", "next_answer", "next_body", "submit_answer", "submit_body", "json_bytes"]

router = APIRouter(prefix="/api/v1", tags=["annotator"], responses=ERROR_RESPONSES)
# the routes' answers besides 200 (FastAPI's responses= type)
_Responses = dict[int | str, dict[str, Any]]
_404: _Responses = {404: ERROR_RESPONSES[401] | {
    "description": "No live assignment with this id."}}
_409: _Responses = {409: ERROR_RESPONSES[401] | {
    "description": "Conflicts with the current state: another label already recorded, "
                   "budget exhausted, being submitted."}}
_410: _Responses = {410: ERROR_RESPONSES[401] | {
    "description": "The lease expired (`lease_expired`), or was lost with Redis and its "
                   "task no longer takes the label (`lease_lost`): not saved "
                   "(`recorded: false`)."}}

AssignmentPath = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
                      description="The assignment id the next call returned.")


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.labelq
    return rt


@router.get("/me/projects", response_model=MyProjectsOut, summary="My projects")
def my_projects(person: Person = Depends(current_person)) -> MyProjectsOut:
    """The projects my token works in (``?project=NAME`` on the other endpoints picks
    one); ``current`` is where a request naming none works."""
    from ..errors import LabelqError
    from ..record.projects import choose_enrolment
    try:
        current: str | None = choose_enrolment(person.enrolments, person.handle, None)[1]
    except LabelqError:
        current = None
    return MyProjectsOut(handle=person.handle, current=current, projects=[
        MyProject(name=name, status=w.status, default=bool(w.preferred))
        for w, name in person.enrolments])


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
        if worker is None:  # deleted with its project since the sign-in
            raise NotFound(f"worker {who.handle!r} no longer exists", worker=who.handle)
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
def current(request: Request, who: Annotator = Depends(current_annotator)) -> Response:
    """What I hold now: issued to me, not yet answered, declined or expired (at most
    ``LABELQ_MAX_OPEN``, 1 by default), oldest first. Reading it issues nothing (``POST
    /assignments/next`` returns the held one again, or a new one when I hold none). Each
    is as ``next`` gave it: with ``suggestion`` exactly when the project shows them."""
    rt = _runtime(request)
    with session_scope(rt.engine) as session:
        held = open_assignments(session, rt.service.scripts, who.worker, who.project)
    return _json({"assignments": held})


def next_answer(issued: Issued | None, who: Annotator, reason: str | None) -> dict[str, Any]:
    """``NextOut`` as a plain dict (every field, as FastAPI would have serialised it):
    the assignment, else ``reason`` why there is none (no I/O)."""
    if issued is None:
        return {"assignment": None, "message": reason}
    a: dict[str, Any] = {
        "assignment_id": issued.assignment_id, "category": issued.category,
        "payload": issued.payload, "labels": list(who.project.labels),
        "expires_ms": issued.expires_ms,
        "expires_at": utc_from_ms(issued.expires_ms).isoformat()}
    if who.project.show_suggestions:  # (the key on every assignment then, gold or not)
        a["suggestion"] = issued.suggestion
    return {"assignment": a, "message": None}


def with_suggestion(service: Service, who: Annotator, issued: Issued | None
                    ) -> Issued | None:
    """``issued`` with the model's answer to show beside it when the project shows
    suggestions (issue 42; one SQL read, blocking), else as it is."""
    if issued is None or not who.project.show_suggestions:
        return issued
    assert who.worker.id is not None, "a worker read from the database has its id"
    return replace(issued, suggestion=service.suggestion(who.project, issued.task_seq,
                                                         who.worker.id))


def next_body(service: Service, who: Annotator) -> dict[str, Any]:
    """``POST /assignments/next``'s answer (blocking: call it in the thread pool)."""
    pid = who.worker.project_id
    issued = with_suggestion(service, who, service.next_assignment(who.handle, pid))
    return next_answer(issued, who,
                       service.idle_reason(who.handle, pid) if issued is None else None)


def submit_answer(out: Submitted, who: Annotator, then_next: bool) -> dict[str, Any]:
    """``SubmitOut`` as a plain dict: the one place a submit's answer is written (no I/O;
    with ``then_next`` and no next assignment, ``message`` is the result's
    ``idle_reason``)."""
    return {"assignment_id": out.assignment_id, "label": out.label,
            "duplicate": out.duplicate,
            "next": next_answer(out.next, who, out.idle_reason) if then_next else None}


async def submit_body(rt: Runtime, who: Annotator, assignment_id: str, label: str,
                      then_next: bool) -> dict[str, Any]:
    """``POST /assignments/{id}/label``'s answer, for the route and the hot path
    (:mod:`.fastpath`) alike: the service's one way in for a submit on an event loop
    (:meth:`~labelq.service.Service.submit_async`: the committer thread's batch, and at
    most one thread-pool call for what else it needs)."""
    out = await rt.service.submit_async(who.handle, assignment_id, label, then_next=then_next,
                                        batches=rt.committer, to_thread=run_in_threadpool,
                                        project_id=who.worker.project_id)
    if then_next and out.next is not None and who.project.show_suggestions:
        out = replace(out, next=await run_in_threadpool(with_suggestion, rt.service, who,
                                                        out.next))
    return submit_answer(out, who, then_next)


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
    return _json(await submit_body(_runtime(request), who, assignment_id, body.label, next))


@router.post("/assignments/{assignment_id}/decline", response_model=DeclineOut,
             summary="Decline an assignment", responses=_404 | _409)
def decline(request: Request, assignment_id: AssignmentId = AssignmentPath,
            who: Annotator = Depends(current_annotator)) -> DeclineOut:
    """Give the assignment back; the task returns to the pool for others."""
    return DeclineOut(**_runtime(request).service.decline(who.handle, assignment_id,
                                                          who.worker.project_id))
