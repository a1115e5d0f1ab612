"""Export jobs: a large export runs in a Celery worker, survives the CLI exiting, and
reports progress in Redis.

``create_export_job`` records the job (``lq:job:{id}``, a HASH kept 7 days: kind, project,
method, format, out, state queued|running|done|failed, done, total, error, created,
finished, and once the labels are aggregated: chosen -- the method that made the answers
(``auto``'s choice) --, aggregation -- the note ``labelq export`` prints, with the reason --
and warning -- empty, or why the confidences are not trustworthy yet); the caller enqueues ``labelq.export`` (``workers/jobs.py``), which calls
``run_export_job``. The output is written to a temporary file beside ``out`` and renamed
over it when complete, so a reader never sees half an export.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from .errors import InputError, NotFound
from .exporting import (
    METHODS,
    aggregate_project,
    aggregated_rows,
    aggregation_notes,
    atomic_output,
    load_project_labels,
    write_rows,
)
from .record.db import session_scope
from .record.projects import get_project
from .reporting import RAW_COLUMNS, iter_raw_labels

if TYPE_CHECKING:
    from redis import Redis
    from redis.typing import EncodableT, FieldT
    from sqlalchemy.engine import Engine

__all__ = ["create_export_job", "run_export_job", "get_job", "job_key", "JOB_TTL"]

JOB_TTL = 7 * 24 * 3600


def job_key(job_id: str) -> str:
    return f"lq:job:{job_id}"


def create_export_job(redis: Redis, project: str, *, out: str, method: str | None = None,
                      fmt: str = "csv", raw: bool = False, exclude_paused: bool = False) -> str:
    if fmt not in ("csv", "jsonl"):
        raise InputError(f"unknown export format {fmt!r}; use csv or jsonl")
    if method is not None and method not in METHODS:
        raise InputError(f"unknown aggregation method {method!r}; choose from "
                         f"{', '.join(METHODS)}", field="method")
    job_id = uuid.uuid4().hex[:16]
    record: dict[FieldT, EncodableT] = {"kind": "export", "project": project, "method": method or "", "format": fmt,
              "raw": int(raw), "exclude_paused": int(exclude_paused),
              "out": os.path.abspath(out), "state": "queued", "done": 0, "total": 0,
              "error": "", "created": time.time(), "finished": "", "chosen": "",
              "aggregation": "", "warning": ""}
    pipe = redis.pipeline()
    pipe.hset(job_key(job_id), mapping=record)
    pipe.expire(job_key(job_id), JOB_TTL)
    pipe.execute()
    return job_id


def get_job(redis: Redis, job_id: str) -> dict[str, Any]:
    raw = redis.hgetall(job_key(job_id))
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
            "warning": job.get("warning") or None}


def run_export_job(engine: Engine, redis: Redis, job_id: str, *, report_every: int = 5000) -> dict[str, Any]:
    """Run (or re-run, if redelivered) the export job ``job_id``; idempotent."""
    job = get_job(redis, job_id)
    if job["state"] == "done":
        return job
    key = job_key(job_id)
    redis.hset(key, mapping={"state": "running", "error": ""})
    out = job["out"]
    try:
        with session_scope(engine) as s:
            project = get_project(s, job["project"])
            if job["raw"]:
                from sqlalchemy import func
                from sqlmodel import select

                from .record.models import Label
                total = s.exec(select(func.count()).select_from(Label)
                               .where(Label.project_id == project.id)).one()
                rows = iter_raw_labels(s, project)
            else:
                pl = load_project_labels(s, project, exclude_paused=bool(job["exclude_paused"]))
                method = job["method"] or project.aggregation
                result = aggregate_project(s, project, pl, method)
                note, warning = aggregation_notes(pl, method, result)
                redis.hset(key, mapping={"chosen": getattr(result, "method_", method),
                                         "aggregation": note, "warning": warning or ""})
                total = int((~pl.view.is_gold).sum())
                rows = aggregated_rows(pl, result)
            redis.hset(key, "total", int(total))
            def progress(done: int) -> None:
                redis.hset(key, "done", done)

            with atomic_output(out) as fh:
                n = write_rows(rows, fh, job["format"],
                               columns=RAW_COLUMNS if job["raw"] else None,
                               progress=progress, every=report_every)
        redis.hset(key, mapping={"state": "done", "done": n, "finished": time.time()})
    except Exception as exc:
        redis.hset(key, mapping={"state": "failed", "error": str(exc)[:2000],
                                 "finished": time.time()})
        raise
    return get_job(redis, job_id)
