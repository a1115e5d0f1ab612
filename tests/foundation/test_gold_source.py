"""Where a gold answer came from (``Task.gold_source``, docs/gold.md): ``labelq gold load``
and ``gold mark --file`` record the file as given, ``gold mark TASK ANSWER`` ``cli``,
``gold correct`` ``correct cli``; ``labelq tasks show``, ``tasks list`` and the operator
API's task view show it. Through Click, on a SQLite file and on PostgreSQL, with a real
Redis. (The review page's answers,
marked at once and queued: tests/api/test_review_api.py; a queued file mark applied later:
tests/pipeline/test_gold_mark.py; an upgraded older database: test_gold_kinds.py.)"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Task
from labelq.record.projects import create_project


@pytest.fixture
def run(db_url, redis_url):
    env = {"LABELQ_DATABASE_URL": db_url, "LABELQ_REDIS_URL": redis_url}

    def invoke(*args: object) -> str:
        res = CliRunner().invoke(cli, [str(a) for a in args], env=env,
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    return invoke


def test_each_way_of_giving_a_gold_answer_records_its_source(run, db_url, redis_url,
                                                            tmp_path, monkeypatch):
    # Given project p with four loaded tasks, run from the folder of the files (so that
    # a file is named as an operator types it: relative, not resolved)
    monkeypatch.chdir(tmp_path)
    run("project", "create", "p", "--labels", "a,b", "--gold-schedule", "fixed:rate=0.1")
    (tmp_path / "tasks.csv").write_text("id,text\nt0,x\nt1,y\nt2,z\nt3,w\n")
    run("tasks", "load", "p", "tasks.csv")
    # When gold is loaded from a file, marked from another, marked on the command line,
    # and one loaded answer is corrected
    (tmp_path / "gold.csv").write_text("id,answer,text\ng0,a,q\ng1,a,r\n")
    run("gold", "load", "p", "gold.csv")
    (tmp_path / "expert").mkdir()
    (tmp_path / "expert" / "marks.csv").write_text("id,answer\nt0,b\n")
    run("gold", "mark", "p", "--file", "expert/marks.csv")
    run("gold", "mark", "p", "t1", "b")
    run("gold", "correct", "p", "g1", "b")
    # Then each gold task shows where its answer came from; an ordinary task shows none
    shown = {t: json.loads(run("tasks", "show", "p", t, "-o", "json"))
             for t in ("g0", "g1", "t0", "t1", "t2")}
    assert {t: d["gold_source"] for t, d in shown.items()} == {
        "g0": "gold.csv", "g1": "correct cli", "t0": "expert/marks.csv", "t1": "cli",
        "t2": None}
    assert (shown["g1"]["gold_answer"], shown["t0"]["gold_kind"]) == ("b", "reviewed")
    # and tasks list --state gold has them as a column (json, and the table)
    listed = json.loads(run("tasks", "list", "p", "--state", "gold", "-o", "json"))
    assert [(t["id"], t["gold_source"]) for t in listed] == [
        ("t0", "expert/marks.csv"), ("t1", "cli"), ("g0", "gold.csv"), ("g1", "correct cli")]
    table = run("tasks", "list", "p", "--state", "gold").splitlines()
    assert table[0].split()[6] == "gold_source"
    assert [line.split()[6] for line in table[2:]] == [
        "expert/marks.csv", "cli", "gold.csv", "correct"]  # ("correct cli": two words)
    # and the operator API's task view (as tasks show) has it too
    from fastapi.testclient import TestClient

    from labelq.api import create_app
    from labelq.record.settings import Settings
    app = create_app(Settings(database_url=db_url, redis_url=redis_url,
                              operator_token="op-token-gold-source"))
    got = TestClient(app).get("/api/v1/projects/p/task", params={"id": "g1"},
                              headers={"Authorization": "Bearer op-token-gold-source"})
    assert got.status_code == 200, got.text
    assert got.json()["gold_source"] == "correct cli"
    # When the same answer is marked again from another file
    (tmp_path / "again.csv").write_text("id,answer\nt0,b\n")
    assert "1 already gold with that answer, skipped" in run(
        "gold", "mark", "p", "--file", "again.csv")
    # Then the task keeps the source that gave the answer first
    with session_scope(engine_for(db_url)) as s:
        assert s.exec(select(Task.gold_source).where(Task.external_id == "t0")).one() \
            == "expert/marks.csv"


def test_a_loaded_files_name_is_recorded_whole_whatever_its_characters(db_url, tmp_path):
    # Given a gold file whose name holds a quote, a tab and a backslash (SQLite's statement
    # and PostgreSQL's COPY each write the name into every row)
    odd = tmp_path / "expert's\tgold\\v2.csv"
    odd.write_text("id,answer\ng0,a\ng1,b\n")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id\nt0\n")
    eng = engine_for(db_url)
    # When it is loaded, and an ordinary task file after it
    with session_scope(eng) as s:
        p = create_project(s, "p", "a,b")
        assert load_tasks(s, p, odd, gold=True).inserted == 2
        assert load_tasks(s, p, str(tasks)).inserted == 1
    # Then both gold rows record the name exactly; the ordinary task has no gold source
    with session_scope(eng) as s:
        got = dict(s.exec(select(Task.external_id, Task.gold_source)).all())
    assert got == {"g0": str(odd), "g1": str(odd), "t0": None}
