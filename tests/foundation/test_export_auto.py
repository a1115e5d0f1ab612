"""The default export early in a project (issue 21): one label per task and a handful of gold
answers. It must be at least as accurate as majority vote, say which method it used, and
warn that its confidences cannot be trusted yet."""

import csv
import io
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker

CLASSES = ["cat", "dog", "fox", "owl"]


@pytest.fixture
def early_project(db_url, tmp_path):
    """Given a project created with the default aggregation, 88 tasks labelled once each and
    11 gold questions labelled once each (99 labels), by six annotators of accuracy 0.95 to
    0.45 who, when wrong, mostly give their own favourite class."""
    engine = engine_for(db_url)
    init_schema(engine)
    rng = np.random.default_rng(21)
    truth = {f"t{i}": CLASSES[int(rng.choice(4, p=[0.4, 0.3, 0.2, 0.1]))] for i in range(88)}
    (tmp_path / "t.csv").write_text("id\n" + "".join(f"{t}\n" for t in truth))
    gold = {f"g{i}": CLASSES[i % 4] for i in range(11)}
    (tmp_path / "g.csv").write_text("id,answer\n" + "".join(f"{g},{a}\n"
                                                            for g, a in gold.items()))
    accuracy = {"a": 0.95, "b": 0.9, "c": 0.8, "d": 0.7, "e": 0.6, "f": 0.45}
    favourite = {"a": "owl", "b": "fox", "c": "owl", "d": "cat", "e": "fox", "f": "owl"}
    with session_scope(engine) as s:
        p = create_project(s, "early", ",".join(CLASSES))
        assert p.aggregation == "auto"
        load_tasks(s, p, tmp_path / "t.csv")
        load_tasks(s, p, tmp_path / "g.csv", gold=True)
        ws = [enroll_worker(s, p, h, cost=1)[0] for h in accuracy]
        tasks = s.exec(select(Task).where(Task.project_id == p.id)).all()
        for t in tasks:
            right = truth.get(t.external_id) or gold[t.external_id]
            w = ws[int(rng.integers(len(ws)))]
            value = right if rng.random() < accuracy[w.handle] else favourite[w.handle]
            a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id, worker_id=w.id,
                           expires=utcnow(), state="submitted", is_gold=t.is_gold)
            s.add(a)
            s.flush()
            s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id, worker_id=w.id,
                        value=value, is_gold=t.is_gold))
    return db_url, truth


def export(db_url, *extra):
    res = CliRunner().invoke(cli, ["export", "early", *extra],
                             env={"LABELQ_DATABASE_URL": db_url}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    return rows, res.stderr


def accuracy(rows, truth):
    return np.mean([r["label"] == truth[r["task"]] for r in rows])


def test_default_export_is_at_least_majority_vote(early_project):
    db_url, truth = early_project
    rows, err = export(db_url)
    mv_rows, mv_err = export(db_url, "--method", "mv")
    assert len(rows) == 88 and len(mv_rows) == 88
    assert accuracy(rows, truth) >= accuracy(mv_rows, truth)
    # when: the default (auto) export; then: stderr names the method it chose, and warns
    assert "aggregation: auto chose " in err
    assert "warning: confidences are not trustworthy yet" in err
    assert "aggregation: mv" in mv_err and "warning" in mv_err
    # the confidences stay below certainty: one label each
    assert max(float(r["confidence"]) for r in rows) < 0.99


def test_dense_export_names_method_without_warning(db_url, tmp_path):
    """With ten checkable labels per confusion cell for every worker, no warning."""
    engine = engine_for(db_url)
    init_schema(engine)
    rng = np.random.default_rng(5)
    (tmp_path / "t.csv").write_text("id\n" + "".join(f"t{i}\n" for i in range(120)))
    with session_scope(engine) as s:
        p = create_project(s, "early", "neg,pos")
        load_tasks(s, p, tmp_path / "t.csv")
        ws = [enroll_worker(s, p, h, cost=1)[0] for h in "abc"]
        for t in s.exec(select(Task).where(Task.project_id == p.id)).all():
            for w in ws:
                value = "pos" if rng.random() < 0.5 else "neg"
                a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id,
                               worker_id=w.id, expires=utcnow(), state="submitted")
                s.add(a)
                s.flush()
                s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id,
                            worker_id=w.id, value=value))
    rows, err = export(db_url)
    assert len(rows) == 120
    # a project routed by auto (the default policy) is exported with auto's worker model
    assert "aggregation: auto chose shrunk" in err and "warning" not in err
    # no random gold answers: no interval, the models' belief and the audit that bounds it
    assert "estimated accuracy" in err and "95% interval" not in err
    assert "the models' belief, unchecked" in err and "confidences: not calibrated" in err
    # 120 tasks: the accuracy of those an audit leaves is itself uncertain by more than 0.03
    assert "no audit of these 120 tasks bounds the rest to +-0.03" in err


def test_background_export_job_reports_the_choice_and_the_warning(early_project, redis_url,
                                                                  tmp_path, capsys):
    """A background export (``labelq export --background``, the API's export job) records
    what a foreground export prints: auto's choice, its reason and the warning; the API's
    JobOut and ``labelq job --wait`` show them."""
    from redis import Redis

    from cli.export import _follow
    from labelq.api.operator import _job_out
    from labelq.jobs import create_export_job, get_job, run_export_job
    from labelq.record.db import database_id, engine_for

    db_url, truth = early_project
    database = database_id(engine_for(db_url))
    _, err = export(db_url)
    lines = err.splitlines()  # the note (the choice, the estimate, ...), then the warning
    warning = next(line for line in lines if line.startswith("warning: "))
    note = "\n".join(lines[:lines.index(warning)])
    redis = Redis.from_url(redis_url)
    try:
        # Given an export job queued with the project's default method (auto)
        job_id, new = create_export_job(redis, database, "early",
                                        out=str(tmp_path / "out.csv"))
        assert new and get_job(redis, database, job_id)["chosen"] == ""
        # When it runs
        job = run_export_job(engine_for(db_url), redis, job_id)
        # Then the record carries auto's choice, the note and the warning of a foreground run
        assert job["state"] == "done"
        assert note.startswith("aggregation: auto chose ") and job["aggregation"] == note
        assert job["chosen"] == note.split()[3] != "auto"
        assert job["warning"] == warning and warning.startswith("warning: ")
        out = _job_out(job)
        assert (out.chosen, out.aggregation, out.warning) == (job["chosen"], note, warning)
        capsys.readouterr()
        _follow(redis, database, job_id)
        shown = capsys.readouterr().err
        assert note in shown and warning in shown
        # and a raw export aggregates nothing: no choice, no warning
        raw_id, _ = create_export_job(redis, database, "early", out=str(tmp_path / "raw.csv"),
                                      raw=True)
        raw = run_export_job(engine_for(db_url), redis, raw_id)
        assert (raw["chosen"], raw["aggregation"], raw["warning"]) == ("", "", "")
        assert _job_out(raw).warning is None
    finally:
        redis.close()
