"""The CLI's side of issue 41: ``gold load`` into a project without a gold schedule warns
(the gold would never be served) and ``status`` (plain and JSON) and ``check`` say so; a
stalled project is named by ``status`` and ``check`` with its ways out. SQLite and
PostgreSQL."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import cli


@pytest.fixture
def run(db_url):
    runner = CliRunner()

    def invoke(*args, ok=True):
        result = runner.invoke(cli, [str(a) for a in args],
                               env={"LABELQ_DATABASE_URL": db_url,
                                    "LABELQ_REDIS_URL": "redis://127.0.0.1:1/0"},
                               catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def _check_rows(run) -> dict:
    # (Redis is not answering here: check fails on it, exit 9, and still reports projects)
    res = run("check", "--timeout", "0.1", "-o", "json", ok=False)
    assert res.exit_code == 9
    return {r["check"]: r for r in json.loads(res.stdout)}


def test_gold_without_a_schedule_warns_on_load_in_status_and_in_check(run, tmp_path):
    run("project", "create", "g", "--labels", "0,1", "--max-labels", "3")
    run("workers", "enroll", "g", "g-ann")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,text\na,hello\nb,world\n")
    run("tasks", "load", "g", tasks)
    gold = tmp_path / "gold.csv"
    gold.write_text("id,answer,text\ng1,1,sure\ng2,0,no\n")
    # When gold is loaded into a project whose gold schedule is none
    res = run("gold", "load", "g", gold)
    # Then the load says it will never be served, and how to set a schedule
    assert "loaded 2 gold questions" in res.stdout
    assert ("warning: project 'g' has no gold schedule: these gold questions will never be "
            "served; set one: labelq project update g --gold-schedule fixed:rate=0.1"
            in res.stderr)
    # And status says so (JSON: gold_unscheduled; plain: a warning on stderr)
    st = json.loads(run("status", "g", "-o", "json").stdout)
    assert st["gold_unscheduled"] == 2 and st["state"] == "running"
    plain = run("status", "g")
    assert "warning: 2 gold questions are loaded but project 'g' has no gold schedule" \
        in plain.stderr
    assert "--gold-schedule" in plain.stderr
    # And check has a WARN row for the project
    row = _check_rows(run)["project g"]
    assert row["ok"] is True and row["warning"] is True and row["gold_unscheduled"] == 2
    assert row["state"] == "running" and "no gold schedule" in row["detail"]
    table = run("check", "--timeout", "0.1", ok=False).stdout
    assert any(line.startswith("project g") and " WARN " in line
               for line in table.splitlines()), table
    # When a schedule is set, no more warnings (and a later gold load is quiet)
    run("project", "update", "g", "--gold-schedule", "fixed:rate=0.1")
    assert json.loads(run("status", "g", "-o", "json").stdout)["gold_unscheduled"] == 0
    assert "no gold schedule" not in run("status", "g").stderr
    assert "project g" not in _check_rows(run)
    gold.write_text("id,answer,text\ng3,1,yes\n")
    assert "warning" not in run("gold", "load", "g", gold).stderr


def test_a_stalled_project_in_status_and_check(run, tmp_path):
    run("project", "create", "s", "--labels", "0,1", "--max-labels", "2")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,text\na,hello\nb,world\n")
    run("tasks", "load", "s", tasks)
    # no annotator enrolled: every open task is stalled
    st = json.loads(run("status", "s", "-o", "json").stdout)
    assert st["state"] == "stalled" and st["stalled"]["tasks"] == 2
    out = run("status", "s").stdout
    assert "stalled: 2 tasks need a label no active annotator can give" in out
    assert "why: no annotator enrolled" in out
    assert "  - enrol an annotator: labelq workers enroll s HANDLE" in out
    assert "  - finish as is: labelq export s" in out
    row = _check_rows(run)["project s"]
    assert row["state"] == "stalled" and row["stalled"]["tasks"] == 2
    # an annotator enrolled: it runs, status and check say nothing of a stall
    run("workers", "enroll", "s", "s-ann")
    st = json.loads(run("status", "s", "-o", "json").stdout)
    assert st["state"] == "running" and st["stalled"] is None
    assert "stalled" not in run("status", "s").stdout
    assert "project s" not in _check_rows(run)
