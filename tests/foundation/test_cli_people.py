"""``labelq workers`` for a person on several projects, and ``labelq tasks list``, through
Click on a SQLite file and on PostgreSQL (issue 43)."""

import csv
import io
import json

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, session_scope
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import get_project, get_worker, worker_by_token


@pytest.fixture
def run(db_url):
    runner = CliRunner()

    def invoke(*args, code=0):
        result = runner.invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url},
                               catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    return invoke


def test_workers_enroll_an_existing_person_in_a_second_project(run, db_url):
    run("project", "create", "a", "--labels", "0,1")
    run("project", "create", "b", "--labels", "x,y")
    first = json.loads(run("workers", "enroll", "a", "alice", "-o", "json").output)
    second = run("workers", "enroll", "b", "alice", "--cost", "3")
    assert "the same token now works in 'b' too" in second.stderr
    assert json.loads(run("workers", "enroll", "b", "bob", "-o", "json").output)["token"]
    # one token, two enrolments
    with session_scope(engine_for(db_url)) as s:
        assert worker_by_token(s, first["token"], "b").cost == 3
    # a command about one enrolment needs the project when there are several
    out = run("workers", "pause", "alice", code=3)
    assert "enrolled in projects 'a', 'b'" in out.output and "--project" in out.output
    assert "alice: paused (in 'b')" in run("workers", "pause", "alice", "--project", "b").output
    rows = list(csv.DictReader(io.StringIO(run("workers", "list", "-o", "csv").output)))
    assert [(r["handle"], r["project"], r["status"]) for r in rows] == [
        ("alice", "a", "active"), ("alice", "b", "paused"), ("bob", "b", "active")]
    # the operator's default makes the enrolment a bare handle means
    run("workers", "default", "alice", "b")
    shown = json.loads(run("workers", "show", "alice", "-o", "json").output)
    assert (shown["project"], shown["status"], shown["default"]) == ("b", "paused", True)
    shown = json.loads(run("workers", "show", "alice", "--project", "a", "-o", "json").output)
    assert (shown["project"], shown["default"]) == ("a", False)
    run("workers", "default", "alice", "nope", code=4)
    run("workers", "default", "bob", "a", code=4)  # (not enrolled there)
    # reset-token: a new token for the person, in both projects
    new = json.loads(run("workers", "reset-token", "alice", "-o", "json").output)["token"]
    with session_scope(engine_for(db_url)) as s:
        assert worker_by_token(s, first["token"], "a") is None
        assert worker_by_token(s, new, "a").handle == "alice"
        assert worker_by_token(s, new).project_id == get_project(s, "b").id  # the default


def _label(s, task, worker, n):
    a = Assignment(id=f"a-{task.id}-{n}", project_id=task.project_id, task_id=task.id,
                   worker_id=worker.id, expires=utcnow(), state="submitted")
    s.add(a)
    s.flush()
    s.add(Label(assignment_id=a.id, project_id=task.project_id, task_id=task.id,
                worker_id=worker.id, value="0"))


def test_tasks_list_filters_and_formats(run, db_url, tmp_path):
    run("project", "create", "p", "--labels", "0,1", "--max-labels", "2")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "category": "ab"[i % 2],
                                         "text": f"item {i} " + "x" * 80}) + "\n"
                             for i in range(6)))
    run("tasks", "load", "p", tasks)
    gold = tmp_path / "gold.csv"
    gold.write_text("id,answer,text\ng0,1,sure\n")
    run("gold", "load", "p", gold)
    run("workers", "enroll", "p", "w1")
    run("workers", "enroll", "p", "w2")
    with session_scope(engine_for(db_url)) as s:  # t0: 2 labels (complete), t1: 1
        p = get_project(s, "p")
        by_id = {t.external_id: t for t in s.exec(select(Task).where(Task.project_id == p.id))}
        w1, w2 = get_worker(s, "w1"), get_worker(s, "w2")
        _label(s, by_id["t0"], w1, 0)
        _label(s, by_id["t0"], w2, 1)
        _label(s, by_id["t1"], w1, 2)

    def listed(*args):
        return json.loads(run("tasks", "list", "p", "--json", *args).output)

    every = listed()
    assert [(t["id"], t["state"], t["labels"]) for t in every] == [
        ("t0", "complete", 2), ("t1", "in_progress", 1), ("t2", "unlabeled", 0),
        ("t3", "unlabeled", 0), ("t4", "unlabeled", 0), ("t5", "unlabeled", 0),
        ("g0", "gold", 0)]
    assert every[-1]["gold_answer"] == "1" and every[-1]["gold_kind"] == "loaded"
    assert every[-1]["gold_source"] == str(gold) and every[0]["gold_source"] is None
    assert every[0]["payload"]["text"].startswith("item 0") and every[0]["gold_answer"] is None
    assert [t["id"] for t in listed("--state", "pending")] == ["t1", "t2", "t3", "t4", "t5"]
    assert [t["id"] for t in listed("--state", "labelled")] == ["t0", "t1"]
    assert [t["id"] for t in listed("--state", "gold")] == ["g0"]
    assert [t["id"] for t in listed("--state", "complete")] == ["t0"]
    assert [t["id"] for t in listed("--category", "b")] == ["t1", "t3", "t5"]
    assert [t["id"] for t in listed("--state", "pending", "--category", "a", "--limit", "2")
            ] == ["t2", "t4"]
    assert listed("--limit", "0") == []
    assert listed("--category", "none") == []
    # csv: a header and a row per task; the table cuts the payload
    rows = list(csv.DictReader(io.StringIO(run("tasks", "list", "p", "-o", "csv").output)))
    assert [r["id"] for r in rows] == [t["id"] for t in every]
    assert json.loads(rows[0]["payload"]) == every[0]["payload"]
    table = run("tasks", "list", "p", "--state", "gold").output.splitlines()
    assert table[0].split() == ["id", "category", "state", "labels", "gold_answer",
                                "gold_kind", "gold_source", "payload"]
    assert table[2].split()[:7] == ["g0", "-", "gold", "0", "1", "loaded",
                                    "…" + str(gold)[-23:]]  # (the file's path: its end)
    assert all(len(line) < 150 for line in run("tasks", "list", "p").output.splitlines())
    assert "(none)" in run("tasks", "list", "p", "--category", "none").output
    # many rows: printed as read, the table as wide as its first 1000 rows need
    many = tmp_path / "many.csv"
    many.write_text("id,category,text\n" + "".join(f"m{i},c,{'y' * (i // 1000)}\n"
                                                   for i in range(1500)))
    run("tasks", "load", "p", many)
    lines = run("tasks", "list", "p", "--category", "c").output.splitlines()
    assert len(lines) == 1502 and lines[2].split()[0] == "m0" and lines[-1].split()[0] == "m1499"
    assert len(json.loads(run("tasks", "list", "p", "-o", "json", "--category", "c").output)
               ) == 1500
    # bad input: named, nothing printed but the error
    assert "no project named 'q'" in run("tasks", "list", "q", code=4).output
    assert "--state" in run("tasks", "list", "p", "--state", "done", code=2).output
