"""Redis restarts under a live Celery worker and annotator traffic: the worker reconnects
(it does not exit) and every label recorded is applied after. The Redis is the
``private_redis`` fixture's (never the shared one: it is shut down here), with its data kept
across restarts, as a deployment's Redis keeps the hot state."""

from __future__ import annotations

import threading
import time

import pytest
import redis as redis_lib
from sqlalchemy import func
from sqlmodel import select

from labelq.errors import ServiceUnavailable
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label
from labelq.record.settings import Settings
from labelq.service import Service
from workers.main import create_app

from .conftest import make_project


def _connections(worker) -> int:
    """How often the worker has (re)connected to the broker so far."""
    return worker.logfile.read_text().count("] Connected to ")


@pytest.mark.timeout(120)
def test_worker_survives_redis_restarts(private_redis, sqlite_url, celery_env,
                                        celery_worker):
    # Given a project, a live worker on a private Redis and annotators submitting labels
    eng, pid = make_project(sqlite_url, n_tasks=300, workers=4, max_labels=3,
                            policy="optkg")
    env = celery_env(sqlite_url)
    env["LABELQ_REDIS_URL"] = private_redis.url
    worker = celery_worker(env)
    r = redis_lib.Redis.from_url(private_redis.url)
    app = create_app(private_redis.url)
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url),
                  notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                 queue="labelq"),
                  state_max_age=0.05)
    stop = threading.Event()
    accepted, interrupted = [0], [0]

    def annotate() -> None:
        i = 0
        while not stop.is_set():
            handle = f"p-w{i % 4}"
            i += 1
            try:
                a = svc.next_assignment(handle)
            except (redis_lib.ConnectionError, redis_lib.TimeoutError):
                time.sleep(0.02)  # Redis is down: the API answers 503 meanwhile
                continue
            if a is None:
                continue
            try:
                svc.submit(handle, a.assignment_id, "ab"[i % 2])
                accepted[0] += 1
            except ServiceUnavailable:
                interrupted[0] += 1  # maybe committed, its Redis finish not done

    thread = threading.Thread(target=annotate, daemon=True)
    thread.start()
    try:
        # When Redis restarts three times while labels stream in, each time once the
        # worker has reconnected after the previous restart and the applier is busy again
        # (its message unacknowledged as the connection drops: the case that killed it)
        for _ in range(3):
            connected = _connections(worker)
            time.sleep(0.8)
            private_redis.stop()
            time.sleep(0.5)
            private_redis.start()
            deadline = time.monotonic() + 40  # kombu's reconnect backoff: 2, 4, 6... s
            while _connections(worker) == connected and worker.proc.poll() is None and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            assert worker.proc.poll() is None, worker.logfile.read_text()[-3000:]
        time.sleep(0.8)
    finally:
        stop.set()
        thread.join(30)
    # Then the worker is still running, and every label SQL holds gets applied
    assert accepted[0] > 0
    deadline = time.monotonic() + 45
    while True:
        with session_scope(eng) as s:
            total = s.exec(select(func.count()).select_from(Label)
                           .where(Label.project_id == pid)).one()
            left = s.exec(select(func.count()).select_from(Label).where(
                Label.project_id == pid, Label.applied_seq.is_(None))).one()
        if left == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = worker.logfile.read_text()
    assert worker.proc.poll() is None, log[-3000:]
    assert "Unrecoverable error" not in log
    assert left == 0, f"{left} of {total} labels never applied"
    assert total >= accepted[0]
    # and the hot state survived: Redis counts every recorded label (but those whose
    # submit the outage cut between the SQL commit and the Redis finish: the reaper
    # finishes them later)
    counted = sum(int(n) for n in r.hgetall(Keys(pid, database_id(eng)).nlabels).values())
    assert total - interrupted[0] <= counted <= total
    r.close()
