"""The operator CLI end to end through Click, on a SQLite file and on PostgreSQL."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

from cli.main import cli


@pytest.fixture
def run(db_url):
    runner = CliRunner()

    def invoke(*args, ok=True):
        result = runner.invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url},
                               catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def test_operator_flow(run, tmp_path):
    run("init")
    run("init")
    run("project", "create", "demo", "--labels", "0,1", "--budget", "50", "--max-labels", "3")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,category,text\na,x,hello\nb,y,world\nc,x,again\n")
    out = run("tasks", "load", "demo", tasks).output
    assert "loaded 3 tasks" in out
    assert "3 already present" in run("tasks", "load", "demo", tasks).output
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "g1", "answer": "1", "text": "sure"}\n')
    assert "loaded 1 gold question into 'demo'" in run("gold", "load", "demo", gold).output
    enrolled = json.loads(run("workers", "enroll", "demo", "alice", "--cost", "0.5",
                              "--capacity", "20", "--output", "json").output)
    assert enrolled["token"] and len(enrolled["token"]) >= 24
    run("workers", "pause", "alice")
    listed = list(csv.DictReader(io.StringIO(run("workers", "list", "-o", "csv").output)))
    assert listed[0]["handle"] == "alice" and listed[0]["status"] == "paused"
    run("workers", "resume", "alice")
    # (stdout: a warning on stderr says the gold has no schedule)
    status = json.loads(run("status", "demo", "-o", "json").stdout)
    assert status["tasks"] == {"unlabeled": 3, "in_progress": 0, "complete": 0, "gold": 1}
    assert status["budget"] == 50 and status["spent"] == 0 and status["left"] == 50
    assert status["workers"][0]["status"] == "active"
    shown = json.loads(run("project", "show", "demo", "-o", "json").output)
    assert shown["max_labels"] == 3 and shown["policy"] == "auto"  # the default
    out_file = tmp_path / "labels.csv"
    run("export", "demo", "--raw", "--format", "csv", "--out", out_file)
    assert out_file.read_text().splitlines()[0] == "task,worker,label,received,is_gold,category,assignment"


def test_an_operator_pause_leaves_a_trail_shown_by_workers_show_and_list(run):
    # Given an annotator paused by the operator, resumed, and paused again
    run("init")
    run("project", "create", "trail", "--labels", "0,1")
    run("workers", "enroll", "trail", "bob")
    run("workers", "pause", "bob")
    run("workers", "pause", "bob")  # (already paused: no second trail)
    shown = json.loads(run("workers", "show", "bob", "-o", "json").output)
    # Then `workers show` and `workers list` give the pause: when, which rule, no evidence
    pause = shown["pause"]
    assert shown["status"] == "paused" and pause["rule"] == "operator"
    assert pause["text"] == "paused by the operator; ask your operator"
    assert pause["gold_answered"] is None and pause["statistic"] is None and pause["at"]
    assert [p["rule"] for p in shown["pauses"]] == ["operator"]
    listed = json.loads(run("workers", "list", "-o", "json").output)
    assert listed[0]["pause"] == pause
    assert "paused by the operator; ask your operator" in run("workers", "list").output
    run("workers", "resume", "bob")
    run("workers", "pause", "bob")
    shown = json.loads(run("workers", "show", "bob", "-o", "json").output)
    assert [p["rule"] for p in shown["pauses"]] == ["operator", "operator"]
    assert shown["pause"] == shown["pauses"][-1]
    run("workers", "resume", "bob")
    shown = json.loads(run("workers", "show", "bob", "-o", "json").output)
    assert shown["pause"] is None and len(shown["pauses"]) == 2  # (the history stays)
    assert "operator" in run("workers", "show", "bob").output
    listed = json.loads(run("workers", "list", "-o", "json").output)
    assert listed[0]["pause"] is None


@pytest.mark.parametrize("args,code,needle", [
    (["project", "show", "nope"], 4, "no project named 'nope'"),
    (["project", "create", "x", "--labels", "0,1", "--policy", "optimal:magic=1"], 8,
     "unknown policy"),
    (["project", "create", "x", "--labels", "0"], 3, "at least two labels"),
    (["workers", "pause", "ghost"], 4, "no worker with handle 'ghost'"),
])
def test_errors_have_exit_codes_and_messages(run, args, code, needle):
    run("init")
    result = run(*args, ok=False)
    assert result.exit_code == code, result.output
    assert needle in result.output


def test_bad_row_reports_file_line_field_and_exit_3(run, tmp_path):
    run("project", "create", "demo", "--labels", "0,1")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,text\na,1\n,2\n")
    result = run("tasks", "load", "demo", bad, ok=False)
    assert result.exit_code == 3
    assert f"{bad}, line 3, field 'id': missing value" in result.output
    status = json.loads(run("status", "demo", "-o", "json").output)
    assert status["tasks"]["unlabeled"] == 0


def test_bad_setting_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["init"], env={"LABELQ_DATABASE_URL": "oracle://x"})
    assert result.exit_code == 2
    assert "LABELQ_DATABASE_URL" in result.output


def test_every_command_has_help():
    runner = CliRunner()

    def walk(cmd, path):
        res = runner.invoke(cli, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        assert "Usage:" in res.output
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(cli, [])


def test_enrolling_for_an_unknown_category_and_a_budget_below_spent_warn(run, db_url, tmp_path):
    # Given a project with tasks of category x, and two labels of cost 3 each
    run("init")
    run("project", "create", "w", "--labels", "0,1")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,category\na,x\nb,x\n")
    run("tasks", "load", "w", tasks)
    run("workers", "enroll", "w", "wa", "--cost", "3", "-o", "json")
    from sqlmodel import select

    from labelq.record.db import engine_for, session_scope
    from labelq.record.models import Assignment, Label, Task, Worker, utcnow
    from labelq.record.projects import budget_spent, get_project
    with session_scope(engine_for(db_url)) as s:
        w = s.exec(select(Worker).where(Worker.handle == "wa")).one()
        for t in s.exec(select(Task)):
            s.add(Assignment(id=f"a-{t.id}", project_id=t.project_id, task_id=t.id,
                             worker_id=w.id, expires=utcnow(), state="submitted"))
            s.flush()
            s.add(Label(assignment_id=f"a-{t.id}", project_id=t.project_id, task_id=t.id,
                        worker_id=w.id, value="1"))
    # When an annotator is enrolled for categories x and z (no task has z)
    res = run("workers", "enroll", "w", "wb", "--categories", "x,z")
    # Then they are enrolled, with a warning naming z only
    assert "warning: no task in 'w' has category 'z' yet" in res.stderr
    assert "'x'" not in res.stderr
    assert "warning" not in run("workers", "enroll", "w", "wc", "--categories", "x").stderr
    # And lowering the budget to what is spent (6) or below warns; above it does not
    with session_scope(engine_for(db_url)) as s:
        assert budget_spent(s, get_project(s, "w")) == 6.0
    assert "6 of the budget is already spent" in run("project", "update", "w", "--budget",
                                                     "6").stderr
    assert "warning" not in run("project", "update", "w", "--budget", "6.5").stderr


def test_reset_token_and_remove(run, db_url):
    from labelq.record.db import engine_for, session_scope
    from labelq.record.projects import worker_by_token
    # Given an enrolled annotator whose token was lost
    run("init")
    run("project", "create", "rt", "--labels", "0,1")
    old = json.loads(run("workers", "enroll", "rt", "lost", "-o", "json").output)["token"]
    # When the operator issues a new one
    res = run("workers", "reset-token", "lost", "-o", "json")
    new = json.loads(res.output)["token"]
    # Then the new token signs in as them and the old one no longer does
    eng = engine_for(db_url)
    with session_scope(eng) as s:
        assert worker_by_token(s, old) is None and worker_by_token(s, new).handle == "lost"
    env = {"LABELQ_DATABASE_URL": db_url}
    res = CliRunner().invoke(cli, ["next", "lost", "--token", old], env=env)
    assert res.exit_code == 6 and "does not belong to worker 'lost'" in res.output
    # And once removed, the annotator cannot act even with the right token; labels stay
    assert "lost: removed" in run("workers", "remove", "lost").output
    res = CliRunner().invoke(cli, ["next", "lost", "--token", new], env=env)
    assert res.exit_code == 6 and "has been removed" in res.output
    rows = json.loads(run("workers", "list", "--project", "rt", "-o", "json").output)
    assert rows[0]["status"] == "removed"
    assert run("workers", "reset-token", "nobody", ok=False).exit_code == 4


@pytest.mark.parametrize("what", ["missing", "directory"])
@pytest.mark.parametrize("command", [("tasks", "load", "p"), ("gold", "load", "p"),
                                     ("aggregate",)])
def test_unreadable_input_file_exits_3(run, tmp_path, what, command):
    # README: 3 = bad input file or argument (Click's own check said 2, a usage error)
    run("project", "create", "p", "--labels", "0,1")
    path = tmp_path / "in.csv"
    if what == "directory":
        path.mkdir()
    res = run(*command, path, ok=False)
    assert res.exit_code == 3, res.output
    assert "in.csv" in res.output and "cannot" in res.output


def test_csv_with_an_unterminated_quote_exits_3_and_loads_nothing(run, tmp_path):
    run("project", "create", "p", "--labels", "0,1")
    path = tmp_path / "t.csv"
    path.write_text('id,text\na,one\nb,"two\nc,three\nd,four\n')
    res = run("tasks", "load", "p", path, ok=False)
    assert res.exit_code == 3, res.output
    assert f"{path}, line 3: unterminated quote" in res.output
    assert json.loads(run("status", "p", "-o", "json").output)["tasks"]["unlabeled"] == 0


def test_a_value_of_several_lines_keeps_to_its_column(run, tmp_path):
    # Given a project whose instructions run over several lines
    run("init")
    guide = tmp_path / "guide.md"
    guide.write_text("# Guide\nLabel the sentiment.\n")
    run("project", "create", "p", "--labels", "a,b", "--instructions", guide)
    # When project show prints it as `key  value` lines
    lines = run("project", "show", "p").output.splitlines()
    # Then the instructions' second line is indented under the values, not taken for a key
    at = next(i for i, line in enumerate(lines) if line.startswith("instructions"))
    column = lines[at].index("# Guide")
    assert lines[at + 1] == " " * column + "Label the sentiment."
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == [
        "name", "labels", "label_names", "instructions", "policy", "budget", "max_labels",
        "aggregation", "gold_schedule", "quality", "show_suggestions", "created"]
