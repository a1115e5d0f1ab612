"""Issue 42: a project that shows suggestions shows none on a task no model predicted, so
gold questions without a prediction, among tasks with one, would stand out. ``project
update --show-suggestions``, ``labelq status`` (and the dashboard's status) and ``labelq
check`` say so, on SQLite and PostgreSQL, until the gold is predicted too."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli.check import _projects
from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Task
from labelq.record.projects import create_project


def _check(db_url: str) -> str:
    """What ``labelq check`` says of the project (its row's detail; the project has other
    warnings too: no annotator, no gold schedule)."""
    return " | ".join(r["detail"] for r in _projects(db_url) if r["check"] == "project leak")


def test_gold_without_predictions_is_warned_of_while_suggestions_show(db_url, tmp_path):
    # Given a project of 10 tasks and 4 gold questions, a model predicting the tasks only
    eng = engine_for(db_url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, "leak", "a,b")
        for i in range(10):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}"))
        for i in range(4):
            s.add(Task(project_id=p.id, seq=10 + i, external_id=f"g{i}", is_gold=True,
                       gold_answer="a"))
    (tmp_path / "tasks.csv").write_text(
        "id,p_a,p_b\n" + "".join(f"t{i},0.7,0.3\n" for i in range(10)))
    env = {"LABELQ_DATABASE_URL": db_url}

    def run(*args: str):
        res = CliRunner().invoke(cli, list(args), env=env)
        assert res.exit_code == 0, res.output
        return res

    run("predictions", "load", "leak", str(tmp_path / "tasks.csv"), "--model", "m")
    # With suggestions off nothing is said: the page shows no suggestion anywhere
    assert "gold questions have no model prediction" not in run("status", "leak").stderr
    assert "gold questions have no model prediction" not in _check(db_url)
    # When the operator turns suggestions on
    said = run("project", "update", "leak", "--show-suggestions").stderr
    # Then the command, labelq status and labelq check warn that gold stands out
    want = ("4 of 4 gold questions have no model prediction, so show no suggestion, while "
            "10 of 10 tasks have one")
    assert want in said
    assert want in run("status", "leak").stderr
    st = json.loads(run("status", "leak", "-o", "json").stdout)
    assert st["suggestion_coverage"] == {"gold": 4, "gold_predicted": 0, "tasks": 10,
                                         "tasks_predicted": 10}
    assert len(st["suggestion_warnings"]) == 1 and want in st["suggestion_warnings"][0]
    assert want in _check(db_url)
    # When the gold is predicted on 3 of 4 and the tasks on 9 of 10: gold lacks one more
    # often (1 in 4 against 1 in 10), still a warning
    (tmp_path / "most.csv").write_text(
        "id,p_a,p_b\n" + "".join(f"t{i},0.7,0.3\n" for i in range(9))
        + "".join(f"g{i},0.6,0.4\n" for i in range(3)))
    run("predictions", "remove", "leak", "--model", "m")
    run("predictions", "load", "leak", str(tmp_path / "most.csv"), "--model", "m")
    assert "1 of 4 gold questions have no model prediction" in run("status", "leak").stderr
    # When a model predicts them all, nothing is said
    (tmp_path / "gold.csv").write_text("id,p_a,p_b\n" + "".join(f"g{i},0.6,0.4\n"
                                                                for i in range(4)))
    run("predictions", "load", "leak", str(tmp_path / "gold.csv"), "--model", "g")
    assert "gold questions have no model prediction" not in run("status", "leak").stderr
    assert "gold questions have no model prediction" not in _check(db_url)
