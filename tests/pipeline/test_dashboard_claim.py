"""A dashboard never waits on a dead worker (issue 45): a Celery worker SIGKILLed while it
computes a project's figures leaves its claim behind; the dashboard still answers within
1 s (it never computes the figures in the request), the claim lapses
``FIGURES_CLAIM_S`` after its last renewal (a live computation renews it every
``FIGURES_BEAT_S``), and then the figures are computed again. Real Celery worker process,
real Redis, SQLite."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

from labelq import dashboard as dash
from labelq.record.db import database_id, engine_for, init_schema, session_scope
from labelq.record.models import Assignment, DashboardFigures, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker, get_project
from labelq.record.settings import Settings

N_TASKS = 6000  # 18,000 labels: a "small" project (LIVE_LABELS), figures in seconds


def _project(url: str, n_tasks: int = N_TASKS) -> int:
    """Project p: ``n_tasks`` tasks, 3 labels each from 20 annotators of varied skill
    (written to the record directly, as applied and counted: what the figures read)."""
    from labelq.record.tally import fold

    eng = engine_for(url)
    init_schema(eng)
    rng = random.Random(0)
    with session_scope(eng) as s:
        p = create_project(s, "p", "a,b,c", policy="uniform")
        ts = [Task(project_id=p.id, seq=i, external_id=f"t{i}") for i in range(n_tasks)]
        s.add_all(ts)
        ws = [enroll_worker(s, p, f"w{j}")[0] for j in range(20)]
        s.flush()
        now = utcnow()
        skill = [rng.uniform(0.5, 0.95) for _ in ws]
        seq = 0
        for t in ts:
            truth = rng.choice("abc")
            for w in rng.sample(ws, 3):
                v = truth if rng.random() < skill[w.seq] else rng.choice("abc")
                aid = f"a{t.seq}-{w.seq}"
                s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                                 expires=now, state="submitted"))
                seq += 1
                s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id,
                            worker_id=w.id, value=v, applied_seq=seq))
        pid = int(p.id)
    with session_scope(eng) as s:
        fold(s, pid)
    return pid


def _row(eng, pid):
    with session_scope(eng) as s:
        row = s.get(DashboardFigures, pid)
        if row is not None:
            s.expunge(row)
        return row


def _dashboard(eng, **kw):
    t0 = time.monotonic()
    with session_scope(eng) as s:
        d = dash.dashboard(s, get_project(s, "p"), **kw)
    return d, time.monotonic() - t0


def test_a_killed_workers_claim_never_holds_the_dashboard(tmp_path, redis_url, celery_env,
                                                         celery_worker):
    # Given a small project (its figures computed for the dashboard, not by the beat) and
    # a real Celery worker computing its figures
    url = f"sqlite:///{tmp_path / 'claim.db'}"
    pid = _project(url)
    eng = engine_for(url)
    worker = celery_worker(celery_env(url))
    from workers.main import create_app
    celery = create_app(redis_url, Settings(redis_url=redis_url))
    celery.send_task("labelq.figures", args=[pid, database_id(eng)], queue="labelq")
    deadline = time.monotonic() + 60
    while (row := _row(eng, pid)) is None or row.claimed is None:
        assert time.monotonic() < deadline, "the worker never claimed the figures"
        time.sleep(0.02)
    # When it is SIGKILLed in the middle of the computation
    worker.kill9()
    row = _row(eng, pid)
    assert row.claimed is not None and row.computed is None, "finished before the kill"
    # Then the dashboard answers within 1 s, saying the figures are pending, and leaves
    # the claim alone (nothing computed in the request, nor by this process meanwhile)
    d, took = _dashboard(eng)
    assert took < 1.0, took
    assert d["quality"]["pending"] and d["quality"]["estimate"] is None
    assert d["status"]["labels"] == 3 * N_TASKS
    assert _row(eng, pid).claimed == row.claimed and _row(eng, pid).computed is None
    # When the claim has gone a claim's length without renewal (a minute, here set back)
    with session_scope(eng) as s:
        s.get(DashboardFigures, pid).claimed = utcnow() - timedelta(
            seconds=dash.FIGURES_CLAIM_S + 1)
    # Then the next request has them computed in the background and still answers at once
    d, took = _dashboard(eng)
    assert took < 1.0, took
    done = dash.refresh_in_background(eng, pid)
    assert done.wait(120)
    d, took = _dashboard(eng)
    assert took < 1.0 and not d["quality"]["pending"], took
    assert d["quality"]["labels"] == 3 * N_TASKS and 0.5 < d["quality"]["estimate"] <= 1
    assert _row(eng, pid).claimed is None
    eng.dispose()


def test_a_live_computation_renews_its_claim(tmp_path, monkeypatch):
    # Given a computation of the figures that takes seconds, renewing its claim often
    url = f"sqlite:///{tmp_path / 'beat.db'}"
    # (not the other test's project: this process keeps a fit of equal labels, and the
    # computation would be quick)
    pid = _project(url, N_TASKS - 500)
    eng = engine_for(url)
    monkeypatch.setattr(dash, "FIGURES_BEAT_S", 0.1)
    seen: list = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            row = _row(eng, pid)
            if row is not None and row.claimed is not None:
                seen.append(row.claimed)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert dash.refresh_figures(eng, pid)
    finally:
        stop.set()
        watcher.join()
    # Then its claim moved forward while it ran (a heartbeat), and was given back at the end
    assert len(set(seen)) >= 3, seen
    assert seen == sorted(seen)
    assert _row(eng, pid).claimed is None and _row(eng, pid).computed is not None
    eng.dispose()
