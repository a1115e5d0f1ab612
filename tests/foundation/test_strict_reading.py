"""One strict reader for every label and task file (issue 35, ``labelq.reading``): the
same bad file is refused the same way by ``aggregate``, ``simulate --data``, ``tasks
load``, ``gold load`` and ``gold mark --file`` — exit code 3, file, line and field named,
nothing written (SQLite and PostgreSQL where a command writes)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, session_scope
from labelq.record.models import Task

# --- label files: aggregate and simulate --data ---------------------------------------------

GOOD = ["task,worker,label"] + [f"t{i},w{j},{(i + j) % 2}" for i in range(6) for j in range(3)]


def _labels(tmp_path, bad_line: int, bad: bytes) -> tuple:
    """A labels.csv (in a data set folder, with a truth.csv) whose line ``bad_line`` is
    ``bad``."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    lines = [x.encode() for x in GOOD]
    lines[bad_line - 1] = bad
    (folder / "labels.csv").write_bytes(b"\n".join(lines) + b"\n")
    (folder / "truth.csv").write_text("task,truth\n" + "".join(f"t{i},0\n" for i in range(6)))
    return folder, folder / "labels.csv"


LABEL_CASES = [
    # the rest of the file merged into one label, exit 0, before
    (b't1,w1,"1', 5, None, "unterminated quote"),
    (b"t1\x00x,w1,1", 5, "task", "NUL"),
    (b"t1,w" + b"x" * (128 * 1024) + b",1", 5, "worker", "longer than 500"),
    (b"t1," + b"w" * (2 << 20) + b",1", 5, None, "longer than 1048576"),
    (b"t1,w\xff1,1", 5, None, "not UTF-8"),  # the wrong line was named before
    (b" t1,w1,1", 5, "task", "spaces around it"),
    (b"t1,w1 ,1", 5, "worker", "spaces around it"),
]


@pytest.mark.parametrize("bad,line,field,needle", LABEL_CASES,
                         ids=["quote", "nul", "128k", "1m", "utf8", "space-task", "space-worker"])
def test_aggregate_refuses_and_writes_nothing(tmp_path, bad, line, field, needle):
    _, path = _labels(tmp_path, line, bad)
    out = tmp_path / "out.csv"
    res = CliRunner().invoke(cli, ["aggregate", str(path), "--out", str(out)])
    assert res.exit_code == 3, res.output
    where = f"{path}, line {line}" + (f", field '{field}'" if field else "")
    assert where in res.output and needle in res.output, res.output
    assert "Traceback" not in res.output and not out.exists()


@pytest.mark.parametrize("bad,line,field,needle", LABEL_CASES[:5],
                         ids=["quote", "nul", "128k", "1m", "utf8"])
def test_simulate_data_refuses_the_same(tmp_path, bad, line, field, needle):
    folder, path = _labels(tmp_path, line, bad)
    res = CliRunner().invoke(cli, ["simulate", "--data", str(folder), "--policy", "uniform",
                                   "--budget-per-task", "1", "--runs", "1"])
    assert res.exit_code == 3, res.output
    assert f"{path}, line {line}" in res.output and needle in res.output, res.output


def test_a_good_label_file_still_aggregates(tmp_path):
    folder, path = _labels(tmp_path, 2, b"t0,w0,0")
    res = CliRunner().invoke(cli, ["aggregate", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["n_tasks"] == 6


# --- task files: tasks load, gold load, gold mark --file ------------------------------------

JSONL_CASES = [
    ('{"id": "t9", "score": NaN}', "score", "NaN is not JSON"),
    ('{"id": "t9", "score": 1e999}', "score", "too large for a float"),
    ('{"id": "t9\\ud800"}', "id", "lone surrogate"),
    ('{"id": "t9", "deep": ' + "[" * 5000 + "]" * 5000 + "}", None, "nested deeper than 64"),
    ('{"id": "t9", "n": ' + "7" * 5000 + "}", "n", "(5000 digits) does not fit in 64 bits"),
    ('{"id": "t9", "n": [9223372036854775808]}', "n", "does not fit in 64 bits"),
    ('{"id": " t9"}', "id", "spaces around it"),
    ('{"id": "t9", "category": "news "}', "category", "spaces around it"),
    ('{"id": true}', "id", "must be a string or number"),
    ('{"id": "t9", "payload": {"text": "x"}, "more": 1}', "payload", "both as the 'payload'"),
    # (issue 45: the last one was kept, silently; 1 MiB and more went in whole)
    ('{"id": "t9", "text": "x", "text": "y"}', "text", "'text' is given twice"),
    ('{"id": "t9", "meta": {"k": 1, "k": 2}}', "k", "'k' is given twice"),
    ('{"id": "t9", "text": "' + "x" * ((1 << 20) + 1) + '"}', "text",
     "longer than 1048576 characters (1 MiB)"),
    ('{"id": "t9", "meta": {"a": "' + "x" * (1 << 20) + '"}}', "meta",
     "longer than 1048576 characters (1 MiB)"),
]
JSONL_IDS = ["nan", "inf", "surrogate", "deep", "5000-digits", "2**63", "space-id",
             "space-category", "bool-id", "payload-and-keys", "duplicate-key",
             "nested-duplicate-key", "1m-string", "1m-object"]


@pytest.fixture
def run(db_url):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, [str(a) for a in args],
                             env={"LABELQ_DATABASE_URL": db_url,
                                  "LABELQ_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert invoke("init").exit_code == 0
    assert invoke("project", "create", "p", "--labels", "a,b").exit_code == 0
    return invoke


def _tasks(db_url) -> list[tuple[str, dict, bool]]:
    with session_scope(engine_for(db_url)) as s:
        return [(t.external_id, t.payload, t.is_gold)
                for t in s.exec(select(Task).order_by(Task.seq)).all()]


def _jsonl(tmp_path, bad: str, *, answer: bool) -> object:
    rows = [json.dumps({"id": f"t{i}", "text": str(i), **({"answer": "a"} if answer else {})})
            for i in range(4)]
    if answer and bad.endswith("}"):
        bad = bad[:-1] + ', "answer": "a"}'
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(rows[:2] + [bad] + rows[2:]) + "\n")
    return path


@pytest.mark.parametrize("bad,field,needle", JSONL_CASES, ids=JSONL_IDS)
@pytest.mark.parametrize("command", ["tasks", "gold"])
def test_tasks_and_gold_load_refuse_and_write_nothing(run, db_url, tmp_path, command, bad,
                                                     field, needle):
    path = _jsonl(tmp_path, bad, answer=command == "gold")
    res = run(command, "load", "p", path)
    assert res.exit_code == 3, res.output
    where = f"{path}, line 3" + (f", field '{field}'" if field else "")
    assert where in res.output and needle in res.output, res.output
    assert "Traceback" not in res.output
    assert _tasks(db_url) == []


@pytest.mark.parametrize("bad,field,needle", JSONL_CASES[:7], ids=JSONL_IDS[:7])
def test_gold_mark_file_refuses_the_same(run, db_url, tmp_path, bad, field, needle):
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"id": f"t{i}", "text": str(i)}) + "\n"
                            for i in range(4)))
    assert run("tasks", "load", "p", good).exit_code == 0
    path = _jsonl(tmp_path, bad, answer=True)
    res = run("gold", "mark", "p", "--file", path)
    assert res.exit_code == 3, res.output
    assert f"{path}, line 3" in res.output and needle in res.output, res.output
    assert not any(gold for _, _, gold in _tasks(db_url))


@pytest.mark.parametrize("bad,field,needle", [
    (b'x1,"a', None, "unterminated quote"),
    (b"x\x001,a", "id", "NUL"),
    (b"x1,a,\xff", None, "not UTF-8"),
    (b" x1,a", "id", "spaces around it"),
    (b"x" * (128 * 1024) + b",a", "id", "longer than 500"),
], ids=["quote", "nul", "utf8", "space", "128k"])
def test_csv_task_files_are_refused_the_same(run, db_url, tmp_path, bad, field, needle):
    path = tmp_path / "t.csv"
    path.write_bytes(b"id,text\nt1,one\n" + bad + b"\nt2,two\n")
    res = run("tasks", "load", "p", path)
    assert res.exit_code == 3, res.output
    where = f"{path}, line 3" + (f", field '{field}'" if field else "")
    assert where in res.output and needle in res.output, res.output
    assert _tasks(db_url) == []


def test_a_nested_payload_object_is_the_payload(run, db_url, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "t1", "payload": {"text": "hello", "n": 2}}) + "\n"
                    + json.dumps({"id": "t2", "text": "flat"}) + "\n"
                    + json.dumps({"id": "t3", "payload": "a string stays a key"}) + "\n")
    assert run("tasks", "load", "p", path).exit_code == 0
    assert _tasks(db_url) == [("t1", {"text": "hello", "n": 2}, False),
                              ("t2", {"text": "flat"}, False),
                              ("t3", {"payload": "a string stays a key"}, False)]


def test_names_given_with_spaces_are_refused_not_stripped(run):
    res = run("project", "create", " q", "--labels", "a,b")
    assert res.exit_code == 3 and "spaces around it" in res.output, res.output
    res = run("workers", "enroll", "p", "alice ")
    assert res.exit_code == 3 and "spaces around it" in res.output, res.output


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_long_line_is_refused_in_time_linear_in_its_length(tmp_path, kind):
    # Given a file whose second line is 64 MiB without a line end (a predictions body may
    # be 256 MiB: POST /api/v1/projects/NAME/predictions), read a chunk at a time
    import time

    from labelq.errors import FileFormatError
    from labelq.record.reading import records
    path = tmp_path / f"long.{kind}"
    body = b'{"id": "' + b"x" * (64 << 20) + b'"}\n'
    path.write_bytes((b"id,text\n" + b"x" * (64 << 20) + b"\n") if kind == "csv" else body)
    # When it is read
    start = time.perf_counter()
    with pytest.raises(FileFormatError) as err:
        for _ in records(path):
            pass
    took = time.perf_counter() - start
    # Then it is refused (a field over 1 MiB) once, in about the time its bytes take to
    # decode: adding each chunk to the line so far copied the line once per chunk (quadratic:
    # 11 s for this JSONL line, 52 s for this CSV one; 256 MiB took minutes per request)
    assert err.value.context["line"] in (1, 2) and "1048576" in str(err.value), err.value
    assert took < 4.0, f"{took:.1f} s"
