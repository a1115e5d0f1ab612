"""Export jobs: a large export runs in a Celery worker, survives the CLI exiting, and
reports progress in Redis.

``create_export_job`` records the job (``lq:{D}:job:{id}``, :func:`~labelq.live.redis.keys.
job_key`: under its database's prefix, so another database's operator never finds it; a
HASH kept 7 days: kind, project, method, format, out, state queued|running|done|failed,
done, total, error, created, finished, spec, and once the labels are aggregated: chosen --
the method that made the answers (``auto``'s choice) --, aggregation -- the note ``labelq
export`` prints, with the reason -- and warning -- empty, or why the confidences are not
trustworthy yet); the caller enqueues ``labelq.export`` (``workers/jobs.py``, on the long
work queue, apart from label application), which calls ``run_export_job``. The output is
written to a temporary file beside ``out`` and renamed over it when complete, so a reader
never sees half an export.

Queued work is bounded: while a job is queued or running it is listed in ``lq:{D}:exports``
(the export it makes -> its id, :func:`~labelq.live.redis.keys.exports_key`); a request for
the same export then returns that job (:attr:`Queued.new` false), and a project with
:data:`EXPORTS_PER_PROJECT` distinct ones queued or running refuses another
(:class:`~labelq.errors.TooManyJobs`, 429). A job leaves the list when it ends (done,
failed) or its key expires.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import InputError, NotFound, TooManyJobs
from .exportfiles import require_pyarrow
from .exporting import (
    FORMATS,
    METHODS,
    aggregate_project,
    aggregation_notes,
    export_file,
    load_project_labels,
    model_report,
)
from .live.redis.keys import exports_key
from .live.redis.keys import job_key as _job_key
from .record.db import database_id, session_scope
from .record.projects import get_project

if TYPE_CHECKING:
    from redis import Redis
    from redis.typing import EncodableT, FieldT
    from sqlalchemy.engine import Engine

__all__ = ["create_export_job", "run_export_job", "get_job", "job_key", "JOB_TTL",
           "EXPORTS_PER_PROJECT", "Queued"]

JOB_TTL = 7 * 24 * 3600
# distinct exports of one project queued or running at once (a repeated request for one
# of them returns it); a bound on the work one operator can queue, not a tuned figure
EXPORTS_PER_PROJECT = 4
_LIVE = ("queued", "running")


def job_key(database: str, job_id: str) -> str:
    """The key of export job ``job_id`` of database ``database`` (its identity)."""
    return _job_key(database, job_id)


class Queued(NamedTuple):
    """A job :func:`create_export_job` returned: ``new`` (enqueue it), or an equal one
    already queued or running."""

    job_id: str
    new: bool


def create_export_job(redis: Redis, database: str, project: str, *, out: str,
                      method: str | None = None, fmt: str = "csv", raw: bool = False,
                      exclude_paused: bool = False, any_out: bool = False) -> Queued:
    """Record an export job of ``project`` of database ``database``, or return the one
    queued or running for the same export (the same project, method, format, ``raw`` and
    ``exclude_paused``; and ``out``, unless ``any_out``: the server chose the file).
    Raises :class:`TooManyJobs` when the project has :data:`EXPORTS_PER_PROJECT` others
    queued or running. Atomic (a WATCH on the list of live jobs: two requests for one
    export make one job)."""
    from redis.exceptions import WatchError

    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; use {', '.join(FORMATS)}",
                         field="format")
    if fmt == "parquet":
        require_pyarrow()  # here, not as a failed job later
    if method is not None and method not in METHODS:
        raise InputError(f"unknown aggregation method {method!r}; choose from "
                         f"{', '.join(METHODS)}", field="method")
    out = os.path.abspath(out)
    spec = json.dumps([project, method or "", fmt, int(raw), int(exclude_paused),
                       "" if any_out else out])
    index = exports_key(database)
    job_id = uuid.uuid4().hex[:16]
    record: dict[FieldT, EncodableT] = {
        "kind": "export", "project": project, "method": method or "", "format": fmt,
        "raw": int(raw), "exclude_paused": int(exclude_paused), "out": out,
        "state": "queued", "done": 0, "total": 0, "error": "", "created": time.time(),
        "finished": "", "chosen": "", "aggregation": "", "warning": "", "spec": spec}
    with redis.pipeline() as pipe:
        while True:
            try:
                pipe.watch(index)  # type: ignore[no-untyped-call]
                listed = {_s(k): _s(v) for k, v in pipe.hgetall(index).items()}
                states = {k: _s(pipe.hget(_job_key(database, v), "state") or b"")
                          for k, v in listed.items()}
                gone = [k for k, st in states.items() if st not in _LIVE]
                if spec in listed and spec not in gone:
                    pipe.unwatch()
                    return Queued(listed[spec], False)
                mine = [k for k in listed if k not in gone and json.loads(k)[0] == project]
                if len(mine) >= EXPORTS_PER_PROJECT:
                    pipe.unwatch()
                    raise TooManyJobs(
                        f"project {project!r} has {len(mine)} exports queued or running "
                        f"(at most {EXPORTS_PER_PROJECT}): wait for one to end, or ask "
                        "for one of them again (the same export returns its job)",
                        project=project, limit=EXPORTS_PER_PROJECT)
                pipe.multi()
                pipe.hset(_job_key(database, job_id), mapping=record)
                pipe.expire(_job_key(database, job_id), JOB_TTL)
                if gone:
                    pipe.hdel(index, *gone)
                pipe.hset(index, spec, job_id)
                pipe.execute()
                return Queued(job_id, True)
            except WatchError:
                continue


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _unlist(redis: Redis, database: str, spec: str, job_id: str) -> None:
    """Take a job that ended off the list of live ones (if it is still the one listed)."""
    from redis.exceptions import WatchError

    index = exports_key(database)
    with redis.pipeline() as pipe:
        while True:
            try:
                pipe.watch(index)  # type: ignore[no-untyped-call]
                if _s(pipe.hget(index, spec) or b"") != job_id:
                    pipe.unwatch()
                    return
                pipe.multi()
                pipe.hdel(index, spec)
                pipe.execute()
                return
            except WatchError:
                continue


def get_job(redis: Redis, database: str, job_id: str) -> dict[str, Any]:
    """Export job ``job_id`` of database ``database``; :class:`NotFound` if it has none
    of that id (another database's included)."""
    raw = redis.hgetall(_job_key(database, job_id))
    if not raw:
        raise NotFound(f"no export job {job_id!r} (jobs are kept 7 days)", job=job_id)
    job: dict[str, Any] = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in raw.items()}
    for key in ("done", "total", "raw", "exclude_paused"):
        job[key] = int(float(job.get(key) or 0))
    for key in ("chosen", "aggregation", "warning"):  # absent from jobs queued before them
        job.setdefault(key, "")
    job["id"] = job_id
    return job


def job_view(job: dict[str, Any]) -> dict[str, Any]:
    """A job as the API answers it (``GET /exports/{id}``) and ``labelq job -o json``
    prints it: one shape for both — booleans as booleans, nothing as null (not ``""``),
    times ISO 8601 (UTC), the progress as a share, the result's URL once done."""
    from datetime import datetime, timezone

    def iso(ts: Any) -> str | None:
        if ts in (None, ""):
            return None
        return datetime.fromtimestamp(float(ts), tz=timezone.utc).isoformat(timespec="seconds")

    done, total, state = int(job["done"]), int(job["total"]), job["state"]
    return {"id": job["id"], "project": job["project"], "state": state,
            "method": job.get("method") or None, "format": job["format"],
            "raw": bool(job["raw"]), "exclude_paused": bool(job["exclude_paused"]),
            "done": done, "total": total,
            "progress": 1.0 if state == "done" else (round(done / total, 4) if total else 0.0),
            "error": job.get("error") or None, "created": iso(job.get("created")),
            "finished": iso(job.get("finished")),
            "result_url": f"/api/v1/exports/{job['id']}/result" if state == "done" else None,
            "chosen": job.get("chosen") or None, "aggregation": job.get("aggregation") or None,
            "warning": job.get("warning") or None,
            "models": json.loads(job["models"]) if job.get("models") else None}


def run_export_job(engine: Engine, redis: Redis, job_id: str, *, report_every: int = 5000
                   ) -> dict[str, Any]:
    """Run (or re-run, if redelivered) the export job ``job_id`` of the database behind
    ``engine``; idempotent."""
    database = database_id(engine)
    job = get_job(redis, database, job_id)
    if job["state"] == "done":
        return job
    key = _job_key(database, job_id)
    redis.hset(key, mapping={"state": "running", "error": ""})
    out = job["out"]
    try:
        with session_scope(engine) as s:
            project = get_project(s, job["project"])
            pl = result = None
            if job["raw"]:
                from sqlalchemy import func
                from sqlmodel import select

                from .record.models import Label
                total = s.exec(select(func.count()).select_from(Label)
                               .where(Label.project_id == project.id)).one()
            else:
                pl = load_project_labels(s, project, exclude_paused=bool(job["exclude_paused"]))
                method = job["method"] or project.aggregation
                result = aggregate_project(s, project, pl, method)
                note, warning = aggregation_notes(pl, method, result)
                report = model_report(pl, result)
                redis.hset(key, mapping={"chosen": getattr(result, "method_", method),
                                         "aggregation": note, "warning": warning or "",
                                         "models": "" if report is None
                                         else json.dumps(report)})
                marked = pl.marked if pl.marked is not None else False
                total = int((~pl.view.is_gold | marked).sum())  # the rows it writes
            redis.hset(key, "total", int(total))
            def progress(done: int) -> None:
                redis.hset(key, "done", done)

            n = export_file(s, project, out, job["format"], raw=bool(job["raw"]), pl=pl,
                            result=result, exclude_paused=bool(job["exclude_paused"]),
                            progress=progress, every=report_every)
        # the webhooks' event, before the job is marked done: a worker dying between the
        # two re-runs the job, which announces it again (at least once, never never)
        _announce(engine, redis, database, job_id, n)
        redis.hset(key, mapping={"state": "done", "done": n, "finished": time.time()})
    except Exception as exc:
        redis.hset(key, mapping={"state": "failed", "error": str(exc)[:2000],
                                 "finished": time.time()})
        if job.get("spec"):
            _unlist(redis, database, job["spec"], job_id)
        raise
    if job.get("spec"):
        _unlist(redis, database, job["spec"], job_id)
    return get_job(redis, database, job_id)


def _announce(engine: Engine, redis: Redis, database: str, job_id: str, rows: int) -> None:
    """Record the ``export.ready`` event of job ``job_id`` (file written, ``rows`` rows) for
    the project's hooks (:mod:`labelq.record.hooks`; one SELECT when it has none)."""
    from .record.hooks import export_ready
    job = get_job(redis, database, job_id)
    with session_scope(engine) as s:
        project = get_project(s, job["project"])
        assert project.id is not None, "a project read from the database has its id"
        export_ready(s, project.id, job=job_id, fmt=job["format"], raw=bool(job["raw"]),
                     method=job.get("method") or None, chosen=job.get("chosen") or None,
                     rows=rows, file=job["out"])
