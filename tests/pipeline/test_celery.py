"""A real Celery worker subprocess applies the labels; kill -9 it mid-stream and start
another: every label is applied exactly once and the posterior equals a fresh SQL fold."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlalchemy import func
from sqlmodel import select

from labelq.live.hotstate import decode_snapshot, fold_from_sql
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label, Project
from labelq.record.settings import Settings
from labelq.service import Service
from workers.main import create_app

from .conftest import make_project


def wait_applied(eng, pid, n, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session_scope(eng) as s:
            left = s.exec(select(func.count()).select_from(Label).where(
                Label.project_id == pid, Label.applied_seq.is_(None))).one()
            total = s.exec(select(func.count()).select_from(Label)
                           .where(Label.project_id == pid)).one()
        if total == n and left == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"{left} of {total} labels still unapplied after {timeout}s")


@pytest.mark.timeout(240)
def test_kill9_worker_mid_stream_loses_nothing(r, redis_url, sqlite_url, celery_env,
                                               celery_worker):
    # Given a project, a service that wakes the applier through Celery, and a real worker
    eng, pid = make_project(sqlite_url, n_tasks=150, workers=5, max_labels=3, policy="optkg")
    app = create_app(redis_url)
    notify = lambda p: app.send_task("labelq.apply_labels", args=[p], queue="labelq")  # noqa
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), notify=notify,
                  state_max_age=0.05)
    env = celery_env(sqlite_url)
    first = celery_worker(env)
    rng = np.random.default_rng(3)
    n = 0

    def stream(k):
        nonlocal n
        for i in range(k):
            h = f"p-w{i % 5}"
            a = svc.next_assignment(h)
            if a is not None:
                svc.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.4)])
                n += 1

    # When labels stream in, the worker is SIGKILLed mid-stream, more labels arrive with no
    # worker, and a second worker starts
    stream(120)
    first.kill9()
    stream(80)
    second = celery_worker(env)
    stream(100)
    wait_applied(eng, pid, n)
    # and Redis counts them applied: written after the commit, by the applier that
    # committed them or, if the kill cut it off there, by the next one (replayed from SQL)
    deadline = time.monotonic() + 30
    while sum(int(v) for v in r.hvals(Keys(pid, database_id(eng)).applied)) != n and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    second.stop()
    assert r.hgetall(Keys(pid, database_id(eng)).applied) == r.hgetall(Keys(pid, database_id(eng)).nlabels)
    # Then every label is applied exactly once, in one dense sequence
    with session_scope(eng) as s:
        seqs = sorted(s.exec(select(Label.applied_seq).where(Label.project_id == pid)).all())
        hot = fold_from_sql(s, s.get(Project, pid))
    assert seqs == list(range(1, n + 1))
    # And the live pipeline's posterior (its snapshot, plus the replay the next reader does)
    # equals a fresh fold from SQL; the pending priorities are the fold's
    snap = decode_snapshot(r.get(Keys(pid, database_id(eng)).state))
    live = svc.cache.get(eng, r, pid)
    np.testing.assert_allclose(live.policy.predict_proba(live.state),
                               hot.policy.predict_proba(hot.state))
    assert 0 < snap["seq"] <= n
    for t, p in r.zrange(Keys(pid, database_id(eng)).pending, 0, -1, withscores=True):
        assert p == pytest.approx(float(hot.policy.priority(hot.state, np.array([int(t)]))[0]))
