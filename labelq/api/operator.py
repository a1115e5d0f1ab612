"""Operator endpoints, under ``/api/v1``; every one needs ``LABELQ_OPERATOR_TOKEN``.

=======  ==================================  =============================================
method   path                                does
=======  ==================================  =============================================
GET      /projects                           every project (name, labels, budget, ...)
GET      /projects/{name}/status             tasks by state, labels, budget, workers (as
                                             ``labelq status -o json``)
GET      /projects/{name}/dashboard          status, gold, throughput, agreement, accuracy
                                             estimate (what the page at /dashboard shows)
GET      /projects/{name}/gold-suggestions   the tasks whose expert answer would teach the
                                             most (labelq gold suggest's top 10; kept a
                                             minute while labels arrive)
POST     /projects/{name}/workers            enroll an annotator; returns its token once
                                             (none for a handle enrolled elsewhere: the
                                             person's token works here too)
GET      /projects/{name}/task?id=ID         a task, its gold answer and every label
POST     /workers/{handle}/status            pause, resume or remove an annotator
POST     /workers/{handle}/token             a new token for a lost one (the old one stops)
POST     /projects/{name}/predictions        load a model's predictions (``?model=M``, a CSV
                                             or JSONL body; as ``labelq predictions load``)
POST     /projects/{name}/exports            start an export job (202)
GET      /exports/{job}                      the job's state and progress
GET      /exports/{job}/result               the exported file, once the job is done
GET      /projects/{name}/hooks              the project's webhooks, with their events
                                             pending, delivered and failed
POST     /projects/{name}/hooks              add a webhook; returns its secret once
DELETE   /projects/{name}/hooks/{hook}       remove one, with its events and their log
GET      /projects/{name}/hooks/{hook}/      its delivery tries, newest first (as
         deliveries                          ``labelq hooks deliveries``)
=======  ==================================  =============================================
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from ..dashboard import dashboard, gold_suggestions, status_report
from ..errors import Conflict, FileFormatError, InputError, NotFound
from ..jobs import create_export_job, get_job, job_view
from ..live.hotstate import bump_epoch
from ..record.db import session_scope
from ..record.hooks import (
    add_hook,
    check_url,
    default_name,
    deliveries,
    get_hook,
    hook_view,
    list_hooks,
    parse_events,
    remove_hook,
)
from ..record.models import Project
from ..record.predictions import PredictionLoad, load_predictions
from ..record.projects import (
    check_method,
    enroll_worker,
    get_project,
    list_projects,
    reset_token,
    set_worker_status,
)
from ..reporting import task_detail
from .auth import require_operator
from .errors import ERROR_RESPONSES
from .schemas import (
    DashboardOut,
    EnrollIn,
    EnrollOut,
    ExportIn,
    GoldSuggestionsOut,
    HookAddedOut,
    HookDeliveryOut,
    HookIn,
    HookOut,
    HookRemovedOut,
    JobOut,
    Name,
    PredictionsOut,
    ProjectOut,
    ProjectStatusOut,
    TaskDetailOut,
    TokenOut,
    WorkerStatusIn,
    WorkerStatusOut,
)

__all__ = ["router", "PREDICTIONS_PATH", "MAX_PREDICTIONS_BODY"]

router = APIRouter(prefix="/api/v1", tags=["operator"], responses=ERROR_RESPONSES,
                   dependencies=[Depends(require_operator)])
# the routes' answers besides 200 (FastAPI's responses= type)
_Responses = dict[int | str, dict[str, Any]]
_404: _Responses = {404: ERROR_RESPONSES[401] | {"description": "No such project or job."}}
_409: _Responses = {409: ERROR_RESPONSES[401] | {
    "description": "Handle taken, or job not done yet."}}

EXPORT_TASK = "labelq.export"  # workers/jobs.py
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson",
               "parquet": "application/vnd.apache.parquet"}

ProjectPath = PathParam(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
                   description="The project's name.")
HandlePath = PathParam(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
                       description="The annotator's handle.")
HookPath = PathParam(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
                    description="The hook's name in the project.")
JobPath = PathParam(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")

# the predictions route takes a file: its body has a limit of its own (BodyLimit's
# ``larger``), is written to a temporary file as it arrives, and loaded from there
PREDICTIONS_PATH = r"/api/v1/projects/[^/]+/predictions"
MAX_PREDICTIONS_BODY = 256 * 2**20  # bytes: about 5M rows of a binary project's CSV
# the body's media type -> its format (else the ``format`` parameter says)
BODY_FORMATS = {"text/csv": "csv", "application/csv": "csv", "application/x-ndjson": "jsonl",
                "application/jsonl": "jsonl", "application/json-lines": "jsonl",
                "application/ndjson": "jsonl"}


@router.get("/projects", response_model=list[ProjectOut], summary="Projects")
def projects(request: Request) -> list[ProjectOut]:
    with session_scope(request.app.state.labelq.engine) as session:
        return [ProjectOut(name=p.name, labels=list(p.labels),
                           label_names=dict(getattr(p, "label_names", None) or {}),
                           budget=p.budget, max_labels=p.max_labels,
                           aggregation=p.aggregation,
                           created=p.created.isoformat(timespec="seconds"))
                for p in list_projects(session)]


@router.get("/projects/{name}/status", response_model=ProjectStatusOut,
            summary="Project status", responses=_404)
def status(request: Request, name: Name = ProjectPath) -> ProjectStatusOut:
    """The numbers of ``labelq status NAME -o json`` (one computation for both)."""
    with session_scope(request.app.state.labelq.engine) as session:
        return ProjectStatusOut(**status_report(session, get_project(session, name)))


@router.get("/projects/{name}/dashboard", response_model=DashboardOut,
            summary="Project dashboard data", responses=_404)
def project_dashboard(request: Request, name: Name = ProjectPath) -> DashboardOut:
    """What the operator page at ``/dashboard`` draws: ``status`` is exactly
    ``labelq status -o json``; ``gold`` each annotator's gold accuracy (raw and smoothed,
    with its interval); ``throughput`` labels/min and the budget projection; ``quality``
    agreement (as ``labelq agreement``) and the accuracy estimate with its curve."""
    with session_scope(request.app.state.labelq.engine) as session:
        return DashboardOut(**dashboard(session, get_project(session, name)))


@router.get("/projects/{name}/gold-suggestions", response_model=GoldSuggestionsOut,
            summary="Tasks to make gold next", responses=_404)
def project_gold_suggestions(request: Request, name: Name = ProjectPath,
                             n: int = Query(10, ge=1, le=50, description="How many (at most).")
                             ) -> GoldSuggestionsOut:
    """``labelq gold suggest``'s list for the dashboard: the labelled, non-gold tasks whose
    expert answer would teach the most (where the candidate aggregations disagree and the
    workers who label the most split), best first. Not part of the dashboard's own data:
    it costs about a second per 100k labels, so the workers compute it in the background
    with the dashboard's figures and this serves the stored list (``computed``: when;
    empty before the first); a small project's is computed on this request and kept per
    project for a minute while labels arrive. ``current`` is the project's aggregation as
    that computation fitted it."""
    with session_scope(request.app.state.labelq.engine) as session:
        return GoldSuggestionsOut(**gold_suggestions(session, get_project(session, name), n=n))


@router.post("/projects/{name}/workers", response_model=EnrollOut, status_code=201,
             summary="Enroll an annotator", responses=_404 | _409)
def enroll(body: EnrollIn, request: Request, name: Name = ProjectPath) -> EnrollOut:
    with session_scope(request.app.state.labelq.engine) as session:
        project = get_project(session, name)
        worker, token = enroll_worker(session, project, body.handle, cost=body.cost,
                                      capacity=body.capacity, categories=body.categories,
                                      preferred=body.default)
        return EnrollOut(handle=worker.handle, project=project.name, cost=worker.cost,
                         capacity=worker.capacity, categories=list(worker.categories),
                         token=token, default=bool(worker.preferred))


@router.get("/projects/{name}/task", response_model=TaskDetailOut,
            summary="A task and its labels", responses=_404)
def task(request: Request, name: Name = ProjectPath,
         id: Name = Query(description="The task's id (as loaded).")) -> TaskDetailOut:
    """As ``labelq tasks show``: category, payload, gold answer, and every label with its
    worker, time and assignment id (the id annotators quote when they report a problem)."""
    with session_scope(request.app.state.labelq.engine) as session:
        return TaskDetailOut(**task_detail(session, get_project(session, name), id))


@router.post("/workers/{handle}/status", response_model=WorkerStatusOut,
             summary="Pause, resume or remove an annotator", responses=_404)
def worker_status(body: WorkerStatusIn, request: Request,
                  handle: Name = HandlePath) -> WorkerStatusOut:
    """Takes effect within a second (sign-ins and worker rows are cached that long). For an
    annotator enrolled in several projects, ``project`` names the enrolment."""
    with session_scope(request.app.state.labelq.engine) as session:
        worker = set_worker_status(session, handle, body.status, body.project)
        project = session.get(Project, worker.project_id)
        return WorkerStatusOut(handle=worker.handle, status=worker.status,
                               project=project.name if project is not None else None)


@router.post("/workers/{handle}/token", response_model=TokenOut,
             summary="Issue an annotator a new token", responses=_404)
def new_token(request: Request, handle: Name = HandlePath) -> TokenOut:
    """Tokens are stored hashed and cannot be shown again; this replaces a lost one (one
    token per person: in every project they are enrolled in)."""
    with session_scope(request.app.state.labelq.engine) as session:
        worker, token = reset_token(session, handle)
        return TokenOut(handle=worker.handle, token=token)


_404_HOOK: _Responses = {404: ERROR_RESPONSES[401] | {"description": "No such project or "
                                                                     "hook."}}
_409_HOOK: _Responses = {409: ERROR_RESPONSES[401] | {
    "description": "The project has a hook of that name (`already_exists`)."}}


@router.get("/projects/{name}/hooks", response_model=list[HookOut], summary="Webhooks",
            responses=_404)
def hooks(request: Request, name: Name = ProjectPath) -> list[HookOut]:
    """The project's webhooks (never their secrets), with their events pending, delivered
    and failed: ``labelq hooks list NAME -o json``. See docs/hooks.md."""
    with session_scope(request.app.state.labelq.engine) as session:
        project = get_project(session, name)
        return [HookOut(**hook_view(session, h)) for h in list_hooks(session, project)]


@router.post("/projects/{name}/hooks", response_model=HookAddedOut, status_code=201,
             summary="Add a webhook", responses=_404 | _409_HOOK)
def hook_add(body: HookIn, request: Request, name: Name = ProjectPath) -> HookAddedOut:
    """As ``labelq hooks add NAME URL --events ...``, with the same checks: the URL http or
    https with a host, known event names, ``budget_below`` in (0, 1) on a project with a
    budget — else 422 ``invalid_input`` naming the ``field``. The ``secret`` is in this
    answer only: the receiver checks each delivery's ``X-Labelq-Signature`` with it."""
    url = check_url(body.url)
    kinds = parse_events(body.events) if body.events or body.budget_below is None else []
    with session_scope(request.app.state.labelq.engine) as session:
        project = get_project(session, name)
        hook, secret = add_hook(session, project, body.name or default_name(session, project,
                                                                             url),
                                url, kinds, body.budget_below)
        return HookAddedOut(project=project.name, name=hook.name, url=hook.url,
                            events=list(hook.events), budget_below=hook.budget_below,
                            secret=secret)


@router.delete("/projects/{name}/hooks/{hook}", response_model=HookRemovedOut,
               summary="Remove a webhook", responses=_404_HOOK)
def hook_remove(request: Request, name: Name = ProjectPath,
                hook: str = HookPath) -> HookRemovedOut:
    """Remove the hook with its undelivered events and its delivery log (``labelq hooks
    remove``)."""
    with session_scope(request.app.state.labelq.engine) as session:
        h = get_hook(session, get_project(session, name), hook)
        url = h.url
        remove_hook(session, h)
    return HookRemovedOut(project=name, name=hook, url=url, removed=True)


@router.get("/projects/{name}/hooks/{hook}/deliveries", response_model=list[HookDeliveryOut],
            summary="A webhook's delivery tries", responses=_404_HOOK)
def hook_deliveries(request: Request, name: Name = ProjectPath, hook: str = HookPath,
                    limit: int = Query(50, ge=1, le=10_000,
                                       description="The latest tries to show.")
                    ) -> list[HookDeliveryOut]:
    """Each try, newest first: the event, which try, the HTTP status or the error, how
    long it took, and the event's state now (``labelq hooks deliveries``)."""
    with session_scope(request.app.state.labelq.engine) as session:
        h = get_hook(session, get_project(session, name), hook)
        return [HookDeliveryOut(**row) for row in deliveries(session, h, limit)]


_PREDICTIONS_BODY = {"required": True, "content": {
    media: {"schema": {"type": "string"}}
    for media in ("text/csv", "application/x-ndjson")}}


@router.post("/projects/{name}/predictions", response_model=PredictionsOut, status_code=201,
             summary="Load a model's predictions", responses=_404 | _409,
             openapi_extra={"requestBody": _PREDICTIONS_BODY})
async def predictions(
        request: Request, name: Name = ProjectPath,
        model: str = Query(min_length=1, max_length=64,
                           description="The model's name; loading again under it makes its "
                                       "next version."),
        format: Literal["csv", "jsonl"] | None = Query(
            None, description="The body's format (default: from its Content-Type, text/csv "
                              "or application/x-ndjson)."),
        normalise: bool = Query(False, description="Divide a row whose probabilities do "
                                                   "not sum to 1 by its sum, instead of "
                                                   "refusing the body.")) -> PredictionsOut:
    """As ``labelq predictions load NAME FILE --model MODEL``, with the file as the body
    (CSV: ``id`` and ``p_<class>`` for every class, or ``id,label,score``; JSONL: the same
    keys): the same checks, all or nothing, a bad row answered 422 naming the body's line
    and field. At most 256 MiB (413 beyond); written to a temporary file as it arrives, not
    held in memory. See docs/models.md."""
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    kind = format or BODY_FORMATS.get(media)
    if kind is None:
        raise InputError(f"cannot tell the body's format from its Content-Type {media!r}: "
                         "send text/csv or application/x-ndjson, or pass format=csv|jsonl",
                         field="format")
    with tempfile.TemporaryDirectory(prefix="labelq-predictions-") as folder:
        path = Path(folder) / f"body.{kind}"
        with path.open("wb") as fh:
            async for chunk in request.stream():
                fh.write(chunk)
        result = await run_in_threadpool(_load_predictions, request, name, path, model, kind,
                                         normalise)
    return PredictionsOut(**result.as_dict())


def _load_predictions(request: Request, name: str, path: Path, model: str, kind: str,
                      normalise: bool) -> PredictionLoad:
    rt = request.app.state.labelq
    try:
        with session_scope(rt.engine) as session:
            project = get_project(session, name)
            result = load_predictions(session, project, path, model=model, fmt=kind,
                                      normalise=normalise)
            pid = int(project.id or 0)
        # a new epoch: every process folds its policy state again with the new version
        # (as ``labelq predictions load``; docs/models.md)
        bump_epoch(rt.redis, rt.service.live.keys(pid))
        return result
    except FileFormatError as exc:  # named as the body, not the server's temporary file
        line, field = exc.context["line"], exc.context["field"]
        where = f"{path}, line {line}" + (f", field '{field}'" if field else "") + ": "
        raise FileFormatError("request body", line, field,
                              exc.message.removeprefix(where)) from None


_429: _Responses = {429: ERROR_RESPONSES[401] | {
    "description": "The project has as many distinct exports queued or running as it may "
                   "(`too_many_exports`)."}}


@router.post("/projects/{name}/exports", response_model=JobOut, status_code=202,
             summary="Start an export job", responses=_404 | _429)
def start_export(request: Request, response: Response, body: ExportIn | None = None,
                 name: Name = ProjectPath) -> JobOut:
    """Queue an aggregated (or, with ``raw``, label-level) export of the project. A Celery
    worker runs it (``labelq.export``); poll ``GET /api/v1/exports/{id}`` and fetch
    ``.../result`` when its state is ``done``. The same export asked for again while
    its job is queued or running returns that job (200); a project with
    ``labelq.jobs.EXPORTS_PER_PROJECT`` distinct ones queued or running is answered 429
    (``too_many_exports``). Files go to the database's own folder of the export
    directory."""
    body = body or ExportIn()
    rt = request.app.state.labelq
    with session_scope(rt.engine) as session:
        project = get_project(session, name)  # 404 now rather than a failed job later
        if not body.raw:  # 422 now for a method the project's labels cannot run
            check_method(project, body.method or project.aggregation)
    database = rt.service.live.database
    folder = rt.export_dir / database  # one database's files apart from another's
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{uuid.uuid4().hex}.{body.format}"
    job_id, new = create_export_job(rt.redis, database, name, out=str(out),
                                    method=body.method, fmt=body.format, raw=body.raw,
                                    exclude_paused=body.exclude_paused, any_out=True)
    if new:
        rt.send_task(EXPORT_TASK, [job_id, database])
    else:
        response.status_code = 200
    response.headers["Location"] = f"/api/v1/exports/{job_id}"
    return _job_out(get_job(rt.redis, database, job_id))


@router.get("/exports/{job_id}", response_model=JobOut, summary="Export job status",
            responses=_404)
def job(request: Request, job_id: str = JobPath) -> JobOut:
    return _job_out(_export_job(request, job_id))


@router.get("/exports/{job_id}/result", summary="Export job result", responses=_404 | _409,
            response_class=FileResponse,
            response_description="The file: CSV (text/csv), JSON lines or Parquet.")
def job_result(request: Request, job_id: str = JobPath) -> FileResponse:
    job = _export_job(request, job_id)
    if job["state"] != "done":
        raise Conflict(f"export job {job_id!r} is {job['state']}, not done", job=job_id,
                       state=job["state"])
    path = Path(job["out"])
    if not path.is_file():
        raise NotFound(f"the file of export job {job_id!r} is gone from the server",
                       job=job_id)
    fmt = job["format"]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", job["project"])[:80] or "export"
    return FileResponse(path, media_type=MEDIA_TYPES.get(fmt, "application/octet-stream"),
                        filename=f"{stem}-{job_id[:8]}.{fmt}")


def _export_job(request: Request, job_id: str) -> dict[str, Any]:
    rt = request.app.state.labelq
    job = get_job(rt.redis, rt.service.live.database, job_id)  # this database's only
    if job.get("kind") != "export":
        raise NotFound(f"no export job {job_id!r}", job=job_id)
    return job


def _job_out(job: dict[str, Any]) -> JobOut:
    return JobOut(**job_view(job))  # labelq job -o json prints the same
