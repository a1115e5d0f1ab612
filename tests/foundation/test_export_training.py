"""Exports ready for training (issue 43): the answers file carries each task's payload and
where its answer comes from (``source``), loads into pandas in one call with no join
(CSV, JSON lines), nests each annotator's label in JSON lines, round-trips through Parquet,
is created with the umask's mode, and a method the project's labels cannot run is refused
before any work, naming the ones that can. SQLite and PostgreSQL (``db_url``)."""

from __future__ import annotations

import json
import os
import stat
import sys
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import GoldMark, create_project, enroll_worker, mark_gold

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

CLASSES = ["cat", "dog", "bird"]
N = 24


def payload_of(i: int) -> dict:
    """Task t<i>'s payload: every kind of value, and fields named as the fixed columns."""
    return {"text": f"picture {i}, \"quoted\", with a comma", "n": i, "score": i / 4,
            "flag": i % 2 == 0, "meta": {"w": i, "h": [1, 2]},
            "mixed": i if i % 3 else f"s{i}",  # an int or a string: a string column
            "label": f"photographer's label {i}", "task": f"inner-{i}"}


@pytest.fixture
def project(db_url, tmp_path):
    """Given a 3-class project of N tasks with payloads and 2 loaded gold questions (never
    exported); t1 marked gold by an audit (random), t2 by an expert's review (suggested);
    t23 unlabelled; three annotators label the rest (a 90 % right, b and c 70 %)."""
    engine = engine_for(db_url)
    init_schema(engine)
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "payload": payload_of(i)}) + "\n"
                             for i in range(N)))
    gold = tmp_path / "g.csv"
    gold.write_text("id,answer,text\ng0,cat,gold zero\ng1,dog,gold one\n")
    rng = np.random.default_rng(4)
    with session_scope(engine) as s:
        p = create_project(s, "pets", ",".join(CLASSES), aggregation="ds")
        load_tasks(s, p, tasks)
        load_tasks(s, p, gold, gold=True)
        ws = [enroll_worker(s, p, h, cost=1)[0] for h in ("a", "b", "c")]
        by_ext = {t.external_id: t for t in s.exec(select(Task).where(Task.project_id == p.id))}
        for ext, t in sorted(by_ext.items()):
            if ext == "t23":
                continue
            truth = t.gold_answer if t.is_gold else CLASSES[int(ext[1:]) % 3]
            for w, acc in zip(ws, (0.9, 0.7, 0.7), strict=True):
                value = truth if rng.random() < acc else CLASSES[(CLASSES.index(truth) + 1) % 3]
                a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id,
                               worker_id=w.id, expires=utcnow(), state="submitted",
                               is_gold=t.is_gold)
                s.add(a)
                s.flush()
                s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id, worker_id=w.id,
                            value=value, is_gold=t.is_gold))
        s.flush()
        mark_gold(s, p, [GoldMark("t1", "dog")], kind="audit")
        mark_gold(s, p, [GoldMark("t2", "bird")], kind="suggested")
    return db_url


def run(db_url, *args, code=0):
    res = CliRunner().invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url})
    assert res.exit_code == code, (res.output, res.exception)
    return res


def raw_labels(db_url, tmp_path):
    out = tmp_path / "raw.csv"
    run(db_url, "export", "pets", "--raw", "--out", out)
    return pd.read_csv(out)


def test_csv_loads_into_pandas_with_payload_and_source(project, tmp_path):
    # When the answers are exported as CSV
    out = tmp_path / "answers.csv"
    run(project, "export", "pets", "--out", out)
    # Then one pandas call reads them, one row per exported task (gold questions left out,
    # the two marked tasks in), with the payload's fields as payload.<field> columns
    df = pd.read_csv(out)
    assert sorted(df["task"]) == sorted(f"t{i}" for i in range(N))
    fixed = ["task", "category", "label", "confidence", "n_labels", "source", "evidence",
             "p_cat", "p_dog", "p_bird"]
    assert list(df.columns) == fixed + ["payload." + k for k in payload_of(0)]
    # fields named as fixed columns do not collide: the answer and the payload's both there
    df = df.set_index("task")
    assert df.loc["t5", "payload.label"] == "photographer's label 5"
    assert df.loc["t5", "payload.task"] == "inner-5" and df.loc["t5", "label"] in CLASSES
    for i in range(N):
        row, want = df.loc[f"t{i}"], payload_of(i)
        assert row["payload.text"] == want["text"] and row["payload.n"] == i
        assert row["payload.score"] == pytest.approx(i / 4)
        assert bool(row["payload.flag"]) is want["flag"]
        assert json.loads(row["payload.meta"]) == want["meta"]  # an object: its JSON
        assert str(row["payload.mixed"]) == str(want["mixed"])
    assert df["payload.n"].dtype == np.int64 and df["payload.score"].dtype == np.float64
    # and each answer says where it comes from
    assert df.loc["t1", "source"] == "gold" and df.loc["t2", "source"] == "expert"
    assert (df.loc["t1", "label"], df.loc["t2", "label"]) == ("dog", "bird")
    assert df.loc["t23", "source"] == "none" and pd.isna(df.loc["t23", "label"])
    rest = df.drop(index=["t1", "t2", "t23"])
    assert set(rest["source"]) == {"aggregated"} and set(rest["evidence"]) == {"humans"}
    assert set(df.loc[["t1", "t2"], "evidence"]) == {"gold"}


def test_jsonl_nests_the_payload_and_each_annotators_label(project, tmp_path):
    # When the answers are exported as JSON lines
    out = tmp_path / "answers.jsonl"
    run(project, "export", "pets", "--format", "jsonl", "--out", out)
    # Then one pandas call reads them, the payload an object and the labels nested
    df = pd.read_json(out, lines=True).set_index("task")
    assert len(df) == N
    for i in range(N):
        assert df.loc[f"t{i}", "payload"] == payload_of(i)
    assert df.loc["t1", "source"] == "gold" and df.loc["t2", "source"] == "expert"
    # each task's labels are the raw export's, in arrival order: no second file needed
    raw = raw_labels(project, tmp_path)
    for task, labels in df["labels"].items():
        mine = raw[raw["task"] == task]
        assert [lab["annotator"] for lab in labels] == list(mine["worker"])
        assert [lab["label"] for lab in labels] == list(mine["label"])
        assert [pd.Timestamp(lab["at"]) for lab in labels] == \
            [pd.Timestamp(t) for t in mine["received"]]
        assert len(labels) == df.loc[task, "n_labels"]
    assert df.loc["t23", "labels"] == [] and len(df.loc["t0", "labels"]) == 3
    assert all(pd.Timestamp(lab["at"]).tzinfo is not None for lab in df.loc["t0", "labels"])


def test_parquet_round_trips(project, tmp_path):
    # When the answers are exported as CSV, JSON lines and Parquet
    paths = {f: tmp_path / f"answers.{f}" for f in ("csv", "jsonl", "parquet")}
    for fmt, path in paths.items():
        run(project, "export", "pets", "--format", fmt, "--out", path)
    # Then the Parquet file reads back as the same rows, typed: the CSV's columns (and the
    # nested labels), the fixed ones equal to the JSON lines' (a CSV cannot tell an empty
    # category from a missing label), the payload's to the CSV's
    got = pd.read_parquet(paths["parquet"])
    csv_rows = pd.read_csv(paths["csv"])
    lines = pd.read_json(paths["jsonl"], lines=True, dtype=False)
    assert list(got.columns) == list(csv_rows.columns) + ["labels"]
    fixed = [c for c in csv_rows.columns if not c.startswith("payload.")]
    assert fixed == [c for c in lines.columns if c not in ("payload", "labels")]
    pd.testing.assert_frame_equal(got[fixed], lines[fixed], check_dtype=False)
    simple = ["payload.text", "payload.n", "payload.score", "payload.flag", "payload.label",
              "payload.task"]
    pd.testing.assert_frame_equal(got[simple], csv_rows[simple], check_dtype=False)
    types = pq.read_schema(paths["parquet"])
    assert types.field("confidence").type == pa.float64()
    assert types.field("n_labels").type == pa.int64()
    assert types.field("payload.n").type == pa.int64()
    assert types.field("payload.score").type == pa.float64()
    assert types.field("payload.flag").type == pa.bool_()
    assert types.field("payload.mixed").type == pa.string()  # ints and strings: strings
    assert types.field("payload.meta").type == pa.string()  # an object: its JSON
    assert types.field("labels").type.value_type.field("at").type == \
        pa.timestamp("us", tz="UTC")
    assert [json.loads(m) for m in got["payload.meta"]] == \
        [payload_of(int(t[1:]))["meta"] for t in got["task"]]
    # and its nested labels are the JSON lines' (the same annotators, labels and times)
    lines = lines.set_index("task")
    for task, labels in zip(got["task"], got["labels"], strict=True):
        want = lines.loc[task, "labels"]
        assert [(x["annotator"], x["label"], pd.Timestamp(x["at"])) for x in labels] == \
            [(x["annotator"], x["label"], pd.Timestamp(x["at"])) for x in want]
    # and the raw export too, its times timestamps
    raw = tmp_path / "raw.parquet"
    run(project, "export", "pets", "--raw", "--format", "parquet", "--out", raw)
    back = pd.read_parquet(raw)
    assert len(back) == len(raw_labels(project, tmp_path))
    assert str(back["received"].dtype) == "datetime64[us, UTC]"
    assert back["is_gold"].dtype == bool


def test_parquet_to_standard_output_is_refused(project):
    res = run(project, "export", "pets", "--format", "parquet", code=3)
    assert "the parquet format is binary: give --out FILE" in res.output


def test_parquet_without_pyarrow_names_the_extra(project, tmp_path, monkeypatch):
    # Given a Python without pyarrow (a None in sys.modules makes its import fail)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "a.parquet"
    res = run(project, "export", "pets", "--format", "parquet", "--out", out, code=3)
    # Then the error names the extra, before any work (no aggregation note) and no file
    assert "pip install 'labelq[parquet]'" in res.output
    assert "aggregation:" not in res.output and not out.exists()
    assert list(tmp_path.glob(".labelq-export-*")) == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_file_mode_follows_the_umask(project, tmp_path, umask):
    # Given a umask
    old = os.umask(umask)
    try:
        # When an export is written (and written again over the first)
        for fmt in ("csv", "parquet", "csv"):
            out = tmp_path / f"a.{fmt}"
            run(project, "export", "pets", "--format", fmt, "--out", out)
            # Then it has the mode any new file gets: 0666 less the umask
            assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    finally:
        os.umask(old)


def test_a_method_the_labels_cannot_run_is_refused_before_any_work(project, tmp_path):
    out = tmp_path / "a.csv"
    # When a 3-class project is exported with kos (binary labels only)
    res = run(project, "export", "pets", "--method", "kos", "--out", out, code=3)
    # Then it is refused before any aggregation, naming the methods that can run
    assert "kos is for binary labels and project 'pets' has 3 classes; choose from auto, " \
        "mv, wmv, ds, onecoin, glad, ds-category, shrunk, policy" in res.output
    assert "aggregation:" not in res.output and not out.exists()
    # and as the agreement's reference, a background export's, a project's default
    assert "choose from auto" in run(project, "agreement", "pets", "--method", "kos",
                                     code=3).output
    assert "choose from auto" in run(project, "export", "pets", "--method", "kos",
                                     "--background", "--out", out, code=3).output
    assert "binary" in run(project, "project", "update", "pets", "--aggregation", "kos",
                           code=3).output
    assert "cannot run on 3 classes" in run(project, "project", "create", "p3", "--labels",
                                            "a,b,c", "--aggregation", "kos", code=3).output
    # and the help says which need binary labels
    assert "`kos` needs binary labels" in " ".join(
        run(project, "export", "--help").output.split())
    # while a binary project runs it
    run(project, "project", "create", "p2", "--labels", "a,b", "--aggregation", "kos")
    run(project, "export", "p2", "--method", "kos")


def test_aggregate_refuses_kos_on_three_classes_naming_the_rest(tmp_path):
    labels = tmp_path / "l.csv"
    labels.write_text("task,worker,label\nt0,a,x\nt0,b,y\nt1,a,z\n")
    res = CliRunner().invoke(cli, ["aggregate", str(labels), "--method", "kos"])
    assert res.exit_code == 3, res.output
    assert "kos is for binary labels" in res.output and "choose from" in res.output
    assert "kos," not in res.output.split("choose from")[1]


def test_a_background_job_writes_parquet(project, redis_url, tmp_path):
    from redis import Redis

    from labelq.jobs import create_export_job, run_export_job
    from labelq.record.db import database_id

    redis = Redis.from_url(redis_url)
    out = tmp_path / "job.parquet"
    try:
        job_id, _ = create_export_job(redis, database_id(engine_for(project)), "pets",
                                      out=str(out), fmt="parquet")
        job = run_export_job(engine_for(project), redis, job_id)
    finally:
        redis.close()
    assert job["state"] == "done" and job["done"] == job["total"] == N
    back = pd.read_parquet(out)
    assert len(back) == N and set(back["source"]) == {"aggregated", "gold", "expert", "none"}
    assert back.set_index("task").loc["t3", "payload.text"] == payload_of(3)["text"]
