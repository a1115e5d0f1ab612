"""The dashboard's heavy figures come from the background: a real Celery worker's beat
finds them due and its ``labelq.figures`` task computes and stores them; the dashboard's
data then serves them with their time and age (and says ``pending`` before)."""

from __future__ import annotations

import time
from datetime import datetime

import numpy as np
import pytest

from labelq import dashboard as dash
from labelq.record.db import session_scope
from labelq.record.models import DashboardFigures
from labelq.record.projects import get_project
from labelq.record.settings import Settings
from labelq.service import Service
from workers.main import create_app

from .conftest import make_project


def _stored(eng, pid):
    with session_scope(eng) as s:
        row = s.get(DashboardFigures, pid)
        return None if row is None else (row.computed, row.labels, row.key)


@pytest.mark.timeout(300)
def test_figures_appear_from_the_worker_with_their_age(r, redis_url, sqlite_url, celery_env,
                                                        celery_worker):
    # Given a project with labels (applied by a real worker) and no figures stored yet
    eng, pid = make_project(sqlite_url, n_tasks=30, n_gold=4, workers=3, max_labels=3)
    app = create_app(redis_url)
    notify = lambda p: app.send_task("labelq.apply_labels", args=[p], queue="labelq")  # noqa
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), notify=notify)
    rng = np.random.default_rng(5)
    n = 0
    for i in range(60):
        h = f"p-w{i % 3}"
        a = svc.next_assignment(h)
        if a is not None:
            svc.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.3)])
            n += 1
    assert n >= 30
    with session_scope(eng) as s:  # (live_labels=0: as a project too large for the request)
        d = dash.dashboard(s, get_project(s, "p"), live_labels=0)
        sug = dash.gold_suggestions(s, get_project(s, "p"), live_labels=0)
    assert d["quality"]["pending"] and d["throughput"]["pending"]
    assert d["quality"]["age_s"] is None and d["gold"] == {}
    assert d["quality"]["estimate"] is None and d["quality"]["behind_labels"] == n
    assert sug["computed"] == "" and sug["tasks"] == []
    # When a worker with its beat runs
    celery_worker(celery_env(sqlite_url))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        got = _stored(eng, pid)
        if got is not None and got[0] is not None:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("no figures stored by the worker")
    computed, labels, _key = got
    # Then the dashboard serves them, with when and how old
    with session_scope(eng) as s:
        p = get_project(s, "p")
        d = dash.dashboard(s, p, live_labels=0)
        sug = dash.gold_suggestions(s, p, live_labels=0, n=3)
    q, th = d["quality"], d["throughput"]
    assert labels == n and q["labels"] == n
    assert not q["pending"] and q["source"] == "background" and th["source"] == "background"
    assert datetime.fromisoformat(q["computed"]) == datetime.fromisoformat(
        computed.isoformat(timespec="seconds") + ("" if computed.tzinfo else "+00:00"))
    assert 0 <= q["age_s"] < 300 and th["age_s"] == q["age_s"]
    assert q["behind_labels"] == d["status"]["labels"] - labels
    assert 0.5 <= q["estimate"] <= 1 and q["agreement"]["labels"] == n
    assert set(d["gold"]) == {"p-w0", "p-w1", "p-w2"}
    assert sum(pt["labels_per_min"] for pt in th["points"]) * th["bucket_minutes"] == \
        pytest.approx(n)
    assert sug["computed"] == q["computed"] and len(sug["tasks"]) <= 3
    # and a request computes nothing itself: the stored figures are what it serves
    time.sleep(1.1)
    with session_scope(eng) as s:
        again = dash.dashboard(s, get_project(s, "p"), live_labels=0)
    if _stored(eng, pid)[0] == computed:  # (not recomputed meanwhile: nothing changed)
        assert again["quality"]["computed"] == q["computed"]
        assert again["quality"]["age_s"] > q["age_s"]
