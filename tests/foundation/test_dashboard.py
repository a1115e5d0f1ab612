"""labelq/dashboard.py on SQLite: labels/min buckets, the budget projection, the accuracy
estimate's curve (kept per prefix) and the status it shares with `labelq status -o json`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import sqlalchemy
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq import dashboard as dash
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Task, Worker
from labelq.record.projects import create_project, enroll_worker, get_project

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def project_with_labels(url: str, minutes_ago: list[float]) -> None:
    """Project p: 20 tasks (4 gold, answer a), 2 workers of cost 1 and 3, one label each
    at the given times (worker by turn), value a."""
    eng = engine_for(url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, "p", "a,b", policy="uniform", budget=100)
        for i in range(20):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", payload={},
                       is_gold=i >= 16, gold_answer="a" if i >= 16 else None))
        w = [enroll_worker(s, p, "cheap", cost=1)[0], enroll_worker(s, p, "dear", cost=3)[0]]
        s.flush()
        tasks = s.exec(select(Task).order_by(Task.seq)).all()
        for n, ago in enumerate(minutes_ago):
            t, worker = tasks[n % 20], w[n % 2]
            at = NOW - timedelta(minutes=ago)
            s.add(Assignment(id=f"a{n}", project_id=p.id, task_id=t.id, worker_id=worker.id,
                             expires=at, state="submitted", is_gold=t.is_gold))
            s.add(Label(assignment_id=f"a{n}", project_id=p.id, task_id=t.id,
                        worker_id=worker.id, value="a", is_gold=t.is_gold, received=at))


def test_throughput_buckets_and_projection(tmp_path):
    url = f"sqlite:///{tmp_path / 'd.db'}"
    # 10 labels 30 minutes ago, 10 in the last 5 minutes: 2 labels/min lately... over 15
    project_with_labels(url, [30.0] * 10 + [4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 0.5, 0.2])
    with session_scope(engine_for(url)) as s:
        p = get_project(s, "p")
        st = dash.status_report(s, p)
        th = dash.throughput(s, p, left=st["left"], now=NOW)
    assert st["spent"] == 40 and st["left"] == 60  # 10 labels at 1, 10 at 3
    assert th["bucket_minutes"] == 1
    assert sum(pt["labels_per_min"] for pt in th["points"]) == 20
    assert th["points"][-1]["spent"] == 40
    assert th["recent_labels_per_min"] == round(10 / 15, 3)
    assert th["recent_spend_per_min"] == round(20 / 15, 6)  # 5 x 1 + 5 x 3 in 15 min
    assert th["runs_out_in_s"] == 60 / (20 / 15) * 60
    assert th["runs_out_at"] == (NOW + timedelta(minutes=45)).isoformat()


def test_quality_curve_and_status_as_the_cli(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.db'}"
    project_with_labels(url, list(np.linspace(60, 1, 40)))
    with session_scope(engine_for(url)) as s:
        p = get_project(s, "p")
        q = dash.quality(s, p)
        again = dash.quality(s, p)
        d = dash.dashboard(s, p)
    assert again is q  # nothing changed: the fit is kept
    assert [pt["labels"] for pt in q["curve"]] == [5 * i for i in range(1, 9)]
    assert q["labels"] == 40 and 0.5 <= q["estimate"] <= 1
    assert q["agreement"]["labels"] == 40
    assert d["gold"]["cheap"]["gold"] == 4 and d["gold"]["cheap"]["gold_accuracy"] == 1.0
    lo, hi = d["gold"]["cheap"]["gold_interval"]
    assert lo < d["gold"]["cheap"]["gold_smoothed"] < hi
    out = CliRunner().invoke(cli, ["status", "p", "-o", "json"],
                             env={"LABELQ_DATABASE_URL": url})
    cli_status = json.loads(out.stdout)
    for st in (cli_status, d["status"]):
        st.pop("oldest_unapplied_s")  # (an age)
    assert cli_status == d["status"]


def test_throughput_reads_only_the_labels_since_the_last_refresh(tmp_path):
    """The label times are kept per project: a refresh reads the labels committed since the
    last one, and gives what a fresh read gives; a label removed makes it read all again."""
    url = f"sqlite:///{tmp_path / 'i.db'}"
    project_with_labels(url, [30.0] * 6 + [3.0, 2.0])
    eng = engine_for(url)
    with session_scope(eng) as s:
        p = get_project(s, "p")
        first = dash.throughput(s, p, left=None, now=NOW)
        assert sum(pt["labels_per_min"] for pt in first["points"]) == 8
        task = s.exec(select(Task).order_by(Task.seq)).first()
        worker = s.exec(select(Worker).where(Worker.handle == "dear")).one()
        for n in range(3):
            s.add(Assignment(id=f"new{n}", project_id=p.id, task_id=task.id,
                             worker_id=worker.id, expires=NOW, state="submitted"))
            s.add(Label(assignment_id=f"new{n}", project_id=p.id, task_id=task.id,
                        worker_id=worker.id, value="a", received=NOW - timedelta(minutes=1)))
    with session_scope(eng) as s:
        p = get_project(s, "p")
        statements = []
        listen = sqlalchemy.event.listen
        listen(eng, "before_cursor_execute",
               lambda *a: statements.append(a[2]) if "FROM label" in a[2] else None)
        again = dash.throughput(s, p, left=None, now=NOW)
        assert any("label.id >" in q and "label.id <=" in q for q in statements)
        dash._TIMES.clear()
        fresh = dash.throughput(s, p, left=None, now=NOW)
    assert again == fresh
    assert sum(pt["labels_per_min"] for pt in again["points"]) == 11
    # the last 15 minutes: the labels 3 and 2 minutes ago (cheap, 1; dear, 3), three new dear
    assert again["recent_spend_per_min"] == round((1 + 3 + 3 * 3) / 15, 6)
    with session_scope(eng) as s:  # a label removed (below the last id): all read again
        s.delete(s.exec(select(Label).order_by(Label.id)).first())
    with session_scope(eng) as s:
        p = get_project(s, "p")
        after = dash.throughput(s, p, left=None, now=NOW)
    assert sum(pt["labels_per_min"] for pt in after["points"]) == 10
