"""Aggregated export and agreement of a project with labels in the durable record."""

import csv
import io
import json
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker, get_project, set_worker_status


@pytest.fixture
def project_db(db_url, tmp_path):
    """Given 30 tasks (truth: even index -> 'pos'), 2 gold questions, three good workers
    and one adversary who always answers the opposite; task t29 has a single label."""
    engine = engine_for(db_url)
    init_schema(engine)
    tasks = tmp_path / "t.csv"
    tasks.write_text("id,category\n" + "".join(f"t{i},c{i % 2}\n" for i in range(30)))
    gold = tmp_path / "g.csv"
    gold.write_text("id,answer\ng0,pos\ng1,neg\n")
    rng = np.random.default_rng(1)
    with session_scope(engine) as s:
        p = create_project(s, "p", "neg,pos", aggregation="ds")
        load_tasks(s, p, tasks)
        load_tasks(s, p, gold, gold=True)
        ws = [enroll_worker(s, p, h, cost=1)[0] for h in ("a", "b", "c", "evil")]
        from sqlmodel import select

        from labelq.record.models import Task
        by_ext = {t.external_id: t for t in s.exec(select(Task).where(Task.project_id == p.id))}
        for ext, t in by_ext.items():
            truth = t.gold_answer if t.is_gold else ("pos" if int(ext[1:]) % 2 == 0 else "neg")
            voters = ws[:1] if ext == "t29" else ws
            for w in voters:
                if w.handle == "evil":
                    value = "neg" if truth == "pos" else "pos"
                else:
                    value = truth if rng.random() < 0.9 else ("neg" if truth == "pos" else "pos")
                a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id,
                               worker_id=w.id, expires=utcnow(), state="submitted",
                               is_gold=t.is_gold)
                s.add(a)
                s.flush()
                s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id, worker_id=w.id,
                            value=value, is_gold=t.is_gold))
    return db_url


def run(db_url, *args):
    res = CliRunner().invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url},
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout  # data only: notes and warnings go to stderr


@pytest.mark.parametrize("method", ["mv", "ds", "onecoin", "glad", "ds-category"])
def test_aggregated_export(project_db, method):
    rows = list(csv.DictReader(io.StringIO(run(project_db, "export", "p", "--method", method))))
    assert len(rows) == 30 and not any(r["task"].startswith("g") for r in rows)
    assert list(rows[0]) == ["task", "category", "label", "confidence", "n_labels", "source",
                             "evidence", "p_neg", "p_pos"]  # (no payload field: no column)
    assert {r["source"] for r in rows} == {"aggregated"}
    assert {r["evidence"] for r in rows} == {"humans"}  # (no model: the labels alone)
    assert all(r["category"] == f"c{int(r['task'][1:]) % 2}" for r in rows)
    for r in rows:
        assert abs(float(r["p_neg"]) + float(r["p_pos"]) - 1) < 1e-5
        assert float(r["confidence"]) == max(float(r["p_neg"]), float(r["p_pos"]))
    single = next(r for r in rows if r["task"] == "t29")
    assert single["n_labels"] == "1" and float(single["confidence"]) < 1.0
    if method != "mv":  # the model learns that 'evil' inverts; votes tie 2:2 at worst
        correct = sum(r["label"] == ("pos" if int(r["task"][1:]) % 2 == 0 else "neg")
                      for r in rows)
        assert correct >= 27


@pytest.mark.parametrize("method", ["mv", "ds", "policy"])
def test_a_task_nobody_labelled_is_exported_without_a_label(project_db, tmp_path, method):
    """Its label is empty (CSV) / null (JSON), never the method's prior guess (the first
    class, or the majority class under Dawid-Skene); its probabilities stay a distribution."""
    engine = engine_for(project_db)
    extra = tmp_path / "extra.csv"
    extra.write_text("id,category\nnew0,c0\nnew1,c1\n")
    with session_scope(engine) as s:
        load_tasks(s, get_project(s, "p"), extra)
    rows = {r["task"]: r for r in csv.DictReader(io.StringIO(
        run(project_db, "export", "p", "--method", method)))}
    lines = run(project_db, "export", "p", "--method", method, "--format", "jsonl").splitlines()
    as_json = {r["task"]: r for r in map(json.loads, lines)}
    for t in ("new0", "new1"):
        assert rows[t]["label"] == "" and rows[t]["n_labels"] == "0"
        assert as_json[t]["label"] is None
        assert abs(float(rows[t]["p_neg"]) + float(rows[t]["p_pos"]) - 1) < 1e-5
    assert rows["t0"]["label"] in ("neg", "pos") and as_json["t0"]["label"] == rows["t0"]["label"]


def test_exclude_paused_and_raw(project_db, tmp_path):
    engine = engine_for(project_db)
    with session_scope(engine) as s:
        set_worker_status(s, "evil", "paused")
    raw = run(project_db, "export", "p", "--raw", "--format", "jsonl")
    assert sum(json.loads(l)["worker"] == "evil" for l in raw.splitlines()) == 31
    with session_scope(engine) as s:  # each label names the assignment it answered
        answered = {(a.id, a.task_id) for a in s.exec(select(Assignment))}
        task_ids = {t.external_id: t.id for t in s.exec(select(Task))}
    assert {(r["assignment"], task_ids[r["task"]]) for r in map(json.loads, raw.splitlines())} \
        == answered
    kept = run(project_db, "export", "p", "--raw", "--format", "jsonl", "--exclude-paused")
    assert not any(json.loads(l)["worker"] == "evil" for l in kept.splitlines())
    rows = list(csv.DictReader(io.StringIO(run(project_db, "export", "p", "--method", "mv",
                                               "--exclude-paused"))))
    correct = sum(r["label"] == ("pos" if int(r["task"][1:]) % 2 == 0 else "neg") for r in rows)
    assert correct >= 27
    out = tmp_path / "agg.jsonl"
    run(project_db, "export", "p", "--format", "jsonl", "--out", out)
    assert len(out.read_text().splitlines()) == 30


def test_agreement_report(project_db):
    report = json.loads(run(project_db, "agreement", "p", "-o", "json"))
    workers = {w["worker"]: w for w in report["workers"]}
    assert workers["evil"]["gold_n"] == 2 and workers["evil"]["gold_accuracy"] == 0.0
    assert workers["evil"]["aggregate_accuracy"] < 0.2
    assert workers["a"]["aggregate_accuracy"] > 0.7
    assert -1.0 <= report["krippendorff_alpha"] < 0.5  # the adversary destroys agreement


def test_workers_list_shows_gold_accuracy(project_db):
    rows = {r["handle"]: r for r in json.loads(run(project_db, "workers", "list", "-o", "json"))}
    assert rows["evil"]["gold"] == 2
    assert rows["evil"]["gold_accuracy"] == 0.0  # raw: 0 right of 2
    assert rows["evil"]["gold_smoothed"] == 0.25  # Beta(1, 3) mean
    lo, hi = rows["evil"]["gold_interval"]
    assert 0 < lo < 0.25 < hi < 1
    assert rows["a"]["gold_accuracy"] is not None and rows["a"]["labels"] == 32


def test_status_warns_when_gold_pool_nearly_exhausted(project_db):
    engine = engine_for(project_db)
    from labelq.record.projects import update_project
    with session_scope(engine) as s:
        update_project(s, "p", gold_schedule="fixed:rate=0.1")
    res = CliRunner().invoke(cli, ["status", "p", "-o", "json"],
                             env={"LABELQ_DATABASE_URL": project_db})
    assert res.exit_code == 0
    warned = {w["worker"] for w in json.loads(res.stdout)["gold_warnings"]}
    assert warned == {"a", "b", "c", "evil"}  # each was issued both gold questions
    assert "has seen 2 of the 2 gold questions" in res.stderr


@pytest.mark.parametrize("opt,value,needle", [
    ("--gold-schedule", "weekly", "unknown gold schedule 'weekly'"),
    ("--gold-schedule", "fixed:rate=2", "rate"),
    ("--quality", "threshold=1.5", "threshold must be in (0, 1)"),
    ("--quality", "limit=3", "it takes threshold, min_gold"),
])
def test_project_gold_and_quality_options_are_validated(db_url, opt, value, needle):
    res = CliRunner().invoke(cli, ["project", "create", "x", "--labels", "0,1", opt, value],
                             env={"LABELQ_DATABASE_URL": db_url})
    assert res.exit_code in (3, 8), res.output
    assert needle in res.output


def test_policy_export_counts_labels_the_applier_has_not_reached(project_db):
    """The fixture's labels were never applied (no Celery worker ran): the policy posterior
    of the export still folds every one of them, as the applier will."""
    rows = list(csv.DictReader(io.StringIO(run(project_db, "export", "p", "--method",
                                               "policy"))))
    with session_scope(engine_for(project_db)) as s:
        only = s.exec(select(Label.value).join(Task, Task.id == Label.task_id)
                      .where(Task.external_id == "t29")).one()
    single = next(r for r in rows if r["task"] == "t29")
    assert single["n_labels"] == "1" and single["label"] == only
    assert float(single[f"p_{only}"]) > 0.5
    correct = sum(r["label"] == ("pos" if int(r["task"][1:]) % 2 == 0 else "neg")
                  for r in rows)
    assert correct >= 24, correct
    with session_scope(engine_for(project_db)) as s:
        assert all(l.applied_seq is None for l in s.exec(select(Label)))


def test_status_counts_tasks_by_state_per_category(project_db, tmp_path):
    # Given the fixture (30 tasks in c0/c1, all labelled; 2 gold without a category) and two
    # new tasks in c1 nobody has labelled
    extra = tmp_path / "extra.csv"
    extra.write_text("id,category\nnew0,c1\nnew1,c1\n")
    with session_scope(engine_for(project_db)) as s:
        load_tasks(s, get_project(s, "p"), extra)
    st = json.loads(run(project_db, "status", "p", "-o", "json"))
    # Then each category has its own counts, and they add up to the totals
    cats = {c["category"]: c for c in st["categories"]}
    assert cats["c0"] == {"category": "c0", "unlabeled": 0, "in_progress": 15, "complete": 0,
                          "gold": 0}
    assert cats["c1"]["unlabeled"] == 2 and cats["c1"]["in_progress"] == 15
    assert cats[""]["gold"] == 2
    for k in ("unlabeled", "in_progress", "complete", "gold"):
        assert sum(c[k] for c in st["categories"]) == st["tasks"][k]
    table = run(project_db, "status", "p")
    assert "category" in table and "c1" in table


def test_tasks_show_lists_a_task_and_its_labels(project_db):
    detail = json.loads(run(project_db, "tasks", "show", "p", "t29", "-o", "json"))
    assert (detail["task"], detail["category"], detail["gold"]) == ("t29", "c1", False)
    assert [l["worker"] for l in detail["labels"]] == ["a"]  # (its single label)
    with session_scope(engine_for(project_db)) as s:
        aid = s.exec(select(Label.assignment_id).join(Task, Task.id == Label.task_id)
                     .where(Task.external_id == "t29")).one()
    assert detail["labels"][0]["assignment"] == aid
    gold = json.loads(run(project_db, "tasks", "show", "p", "g0", "-o", "json"))
    assert gold["gold"] is True and gold["gold_answer"] == "pos" and len(gold["labels"]) == 4
    table = run(project_db, "tasks", "show", "p", "g0")
    assert "gold_answer  pos" in table and "evil" in table
    res = CliRunner().invoke(cli, ["tasks", "show", "p", "nope"],
                             env={"LABELQ_DATABASE_URL": project_db})
    assert res.exit_code == 4 and "no task 'nope'" in res.output


def test_status_counts_labels_waiting_for_the_applier_and_warns_when_they_are_old(
        project_db):
    # Given the fixture's labels, none applied (no Celery worker ran), just received
    st = json.loads(run(project_db, "status", "p", "-o", "json"))
    assert st["unapplied"] == st["labels"] == 125
    assert 0 <= st["oldest_unapplied_s"] < 60
    res = CliRunner().invoke(cli, ["status", "p"], env={"LABELQ_DATABASE_URL": project_db})
    assert "is a labelq run-worker running" not in res.stderr
    # When the oldest has waited two hours
    from datetime import timedelta
    with session_scope(engine_for(project_db)) as s:
        first = s.exec(select(Label).order_by(Label.id)).first()
        first.received = utcnow() - timedelta(hours=2)
        s.add(first)
    # Then status says so and asks whether a worker runs
    res = CliRunner().invoke(cli, ["status", "p"], env={"LABELQ_DATABASE_URL": project_db})
    assert res.exit_code == 0 and "125 labels wait to be applied" in res.stderr
    assert "is a labelq run-worker running?" in res.stderr
    res = CliRunner().invoke(cli, ["status", "p", "-o", "json"],
                             env={"LABELQ_DATABASE_URL": project_db})
    assert 7190 < json.loads(res.stdout)["oldest_unapplied_s"] < 7300


def test_export_dataset_is_replayed_by_the_simulator(project_db, tmp_path):
    from labelq.datasets import load_dataset
    # When the project is written as a data set, with the gold answers and then with
    # Dawid-Skene's answers as the truth
    gold_dir, ds_dir = tmp_path / "gold", tmp_path / "ds"
    res = CliRunner().invoke(cli, ["export-dataset", "p", str(gold_dir)],
                             env={"LABELQ_DATABASE_URL": project_db})
    assert res.exit_code == 0, res.output
    assert "wrote 125 labels on 32 tasks" in res.stderr and "truth for 2 tasks" in res.stderr
    run(project_db, "export-dataset", "p", ds_dir, "--truth", "ds")
    # Then the simulator's loader reads back every label, the truths and the categories
    data = load_dataset(ds_dir)
    assert data.task.size == 125 and data.n_tasks == 32 and data.n_workers == 4
    assert int((data.truth >= 0).sum()) == 32
    assert set(data.categories) == {"c0", "c1", ""}  # (gold has none: a category of its own)
    ds = {r["task"]: r["label"] for r in csv.DictReader(io.StringIO(
        run(project_db, "export", "p", "--method", "ds")))}
    truth = dict(csv.reader(io.StringIO((ds_dir / "truth.csv").read_text())))
    assert all(truth[t] == ds[t] for t in ds)
    assert (truth["g0"], truth["g1"]) == ("pos", "neg")  # gold answers, not DS's
    assert load_dataset(gold_dir).truth.tolist().count(-1) == 30
    # and `labelq simulate --data` replays it
    out = run(project_db, "simulate", "--data", ds_dir, "--policy", "uniform",
              "--budget-per-task", "1,2", "--runs", "2")
    assert "uniform" in out
    # A folder that is not empty is refused, and nothing is written into it
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    res = CliRunner().invoke(cli, ["export-dataset", "p", str(tmp_path / "full")],
                             env={"LABELQ_DATABASE_URL": project_db})
    assert res.exit_code == 3 and "not an empty folder" in res.output
    assert [f.name for f in (tmp_path / "full").iterdir()] == ["keep.txt"]
