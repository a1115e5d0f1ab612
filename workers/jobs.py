"""Celery tasks for operator jobs (exports). Thin: ids in, a pure labelq function called.

They go to the long work queue (``<queue>.long``: :func:`workers.main.queue_for`), apart
from label application: ``labelq run-worker`` serves it in a process of its own."""

from __future__ import annotations

from celery import Task

from labelq.jobs import run_export_job

from .main import app
from .ours import ours


# (Celery ships no type hints: its decorator leaves what it wraps untyped)
@app.task(name="labelq.export", bind=True, max_retries=3)  # type: ignore[untyped-decorator]
def export(self: Task, job_id: str, database: str | None = None) -> str:
    from labelq.live.redis.connect import connect
    from labelq.record.location import open_configured
    from labelq.record.settings import load_settings

    settings = load_settings()
    engine = open_configured(settings)
    if not ours(engine, database, f"export job {job_id}"):
        return "ignored"
    redis = connect(settings.redis_url)
    try:
        return str(run_export_job(engine, redis, job_id)["state"])
    finally:
        redis.close()
