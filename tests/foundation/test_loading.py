"""Loading is all or nothing, names file/line/field, and is idempotent (SQLite and PostgreSQL)."""

import json

import pytest
from sqlalchemy import func
from sqlmodel import select

from labelq.errors import FileFormatError, InputError
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Task
from labelq.record.projects import create_project, get_project


@pytest.fixture
def eng(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "p", "0,1")
    return engine


def load(eng, path, **kw):
    with session_scope(eng) as s:
        return load_tasks(s, get_project(s, "p"), path, **kw)


def count(eng):
    with session_scope(eng) as s:
        return s.exec(select(func.count()).select_from(Task)).one()


def write_csv(path, n, bad_line=None, bad=""):
    lines = ["id,category,text"]
    for i in range(2, n + 2):  # file line numbers: header is line 1
        lines.append(bad if i == bad_line else f"t{i},c{i % 3},text {i}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_loads_csv_with_payload_and_category(eng, tmp_path):
    r = load(eng, write_csv(tmp_path / "t.csv", 10))
    assert (r.inserted, r.skipped_existing) == (10, 0)
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.external_id == "t5")).one()
        assert t.category == "c2" and t.payload == {"text": "text 5"} and not t.is_gold
        assert sorted(s.exec(select(Task.seq))) == list(range(10))


@pytest.mark.parametrize("bad,field,needle", [
    (",c1,x", "id", "missing value"),
    ("t7,c1,x", "id", "duplicate id 't7' (first on line 7)"),
    ("t9999,c1", None, "expected 3 columns, found 2"),
])
def test_malformed_row_5000_names_line_and_writes_nothing(eng, tmp_path, bad, field, needle):
    path = write_csv(tmp_path / "t.csv", 6000, bad_line=5000, bad=bad)
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert exc.value.line == 5000
    assert exc.value.field == field
    assert "line 5000" in str(exc.value) and needle in str(exc.value)
    assert str(path) in str(exc.value)
    assert count(eng) == 0


def test_bad_encoding_names_line(eng, tmp_path):
    path = write_csv(tmp_path / "t.csv", 20)
    raw = path.read_bytes().replace(b"text 12", b"text \xff12")
    path.write_bytes(raw)
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert exc.value.line == 12 and "encoding" in str(exc.value)
    assert count(eng) == 0


def test_jsonl_broken_json_names_line(eng, tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [json.dumps({"id": f"j{i}", "category": "a", "url": f"http://x/{i}.png"})
            for i in range(30)]
    rows[16] = '{"id": "j16", "category": '
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert exc.value.line == 17 and "broken JSON" in str(exc.value)
    assert count(eng) == 0


def test_jsonl_loads_payload(eng, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": 1, "category": "a", "text": "x", "meta": {"k": [1, 2]}}\n\n'
                    '{"id": "2", "text": "y"}\n')
    assert load(eng, path).inserted == 2
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.external_id == "1")).one()
        assert t.payload == {"text": "x", "meta": {"k": [1, 2]}}


def test_loading_twice_does_not_duplicate(eng, tmp_path):
    path = write_csv(tmp_path / "t.csv", 50)
    assert load(eng, path).inserted == 50
    again = load(eng, path)
    assert (again.inserted, again.skipped_existing) == (0, 50)
    more = write_csv(tmp_path / "more.csv", 60)
    assert load(eng, more).inserted == 10
    assert count(eng) == 60
    with session_scope(eng) as s:
        assert sorted(s.exec(select(Task.seq))) == list(range(60))


def test_gold_answer_must_be_in_label_set(eng, tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("id,answer,text\ng1,1,a\ng2,0,b\ng3,yes,c\n")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path, gold=True)
    assert (exc.value.line, exc.value.field) == (4, "answer")
    assert count(eng) == 0
    path.write_text("id,answer,text\ng1,1,a\ng2,0,b\n")
    assert load(eng, path, gold=True).inserted == 2
    with session_scope(eng) as s:
        g = s.exec(select(Task).where(Task.external_id == "g1")).one()
        assert g.is_gold and g.gold_answer == "1"


def test_gold_needs_answer_column(eng, tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("id,text\ng1,a\n")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path, gold=True)
    assert exc.value.field == "answer"


def test_unknown_extension_needs_format(eng, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("id\na\n")
    with pytest.raises(InputError, match="--format"):
        load(eng, path)
    assert load(eng, path, fmt="csv").inserted == 1


def test_missing_id_column(eng, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,category\na,b\n")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert (exc.value.line, exc.value.field) == (1, "id")


def test_csv_unterminated_quote_names_the_line_it_opened_on(eng, tmp_path):
    # a quote left open used to swallow the rest of the file into one field, and load
    path = write_csv(tmp_path / "t.csv", 50, bad_line=20, bad='t20,c1,"unclosed text')
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert exc.value.line == 20 and "unterminated quote" in str(exc.value)
    assert count(eng) == 0


def test_csv_quote_closed_lines_later_names_where_it_opened(eng, tmp_path):
    path = write_csv(tmp_path / "t.csv", 50, bad_line=20, bad='t20,c1,"opened here')
    path.write_text(path.read_text().replace("t30,c0,text 30", 't30,c0,"text" 30'))
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert exc.value.line == 20 and "closed on line 30" in str(exc.value)
    assert count(eng) == 0


def test_csv_quoted_field_over_several_lines_still_loads(eng, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('id,text\na,"two\nlines"\nb,plain\n')
    assert load(eng, path).inserted == 2
    with session_scope(eng) as s:
        assert s.exec(select(Task.payload).where(Task.external_id == "a")).one() == \
            {"text": "two\nlines"}


def test_jsonl_line_separators_inside_strings_are_text(eng, tmp_path):
    # U+2028, U+2029 and U+0085 are valid unescaped in JSON strings; only \n ends a line
    path = tmp_path / "t.jsonl"
    texts = ["a\u2028b", "c\u0085d", "e\u2029f"]
    path.write_text("".join(json.dumps({"id": f"j{i}", "text": t}, ensure_ascii=False) + "\r\n"
                            for i, t in enumerate(texts)), newline="")
    assert load(eng, path).inserted == 3
    with session_scope(eng) as s:
        got = dict(s.exec(select(Task.external_id, Task.payload)).all())
    assert got == {f"j{i}": {"text": t} for i, t in enumerate(texts)}


@pytest.mark.parametrize("row,field,needle", [
    ({"id": "t\x00x"}, "id", "control character '\\x00'"),
    ({"id": "t\tx"}, "id", "control character '\\t'"),
    ({"id": "x" * 501}, "id", "longer than 500 characters"),
    ({"id": "t", "category": "c" * 201}, "category", "longer than 200 characters"),
    ({"id": "t", "category": "a\x00"}, "category", "control character"),
    ({"id": "t", "text": {"deep": ["ok", "n\x00ul"]}}, "text", "NUL"),
])
def test_bad_values_are_validated_not_tracebacks(eng, tmp_path, row, field, needle):
    path = tmp_path / "t.jsonl"
    good = [json.dumps({"id": f"g{i}", "text": "fine"}) for i in range(5)]
    path.write_text("\n".join(good[:3] + [json.dumps(row)] + good[3:]) + "\n")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert (exc.value.line, exc.value.field) == (4, field)
    assert needle in str(exc.value)
    assert count(eng) == 0


def test_csv_nul_in_payload_names_the_column(eng, tmp_path):
    path = write_csv(tmp_path / "t.csv", 10, bad_line=6, bad="t6,c0,te\x00xt")
    with pytest.raises(FileFormatError) as exc:
        load(eng, path)
    assert (exc.value.line, exc.value.field) == (6, "text")
    assert count(eng) == 0


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_unreadable_file_is_an_input_error(eng, tmp_path, what):
    path = tmp_path / "nope.csv"
    if what == "directory":
        path.mkdir()
    with pytest.raises(InputError, match="nope.csv: cannot read") as exc:
        load(eng, path)
    assert exc.value.exit_code == 3


def test_gold_with_ids_already_loaded_as_tasks_is_refused(tmp_path):
    """Gold built from ids already loaded as tasks was skipped as "already present" (exit
    0): the operator ended up with no gold. It is refused, nothing loaded, with the ids."""
    from click.testing import CliRunner

    from cli.main import cli

    db = f"sqlite:///{tmp_path / 'g.db'}"
    env = {"LABELQ_DATABASE_URL": db}
    run = CliRunner().invoke
    assert run(cli, ["init"], env=env).exit_code == 0
    assert run(cli, ["project", "create", "g", "--labels", "a,b"], env=env).exit_code == 0
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,text\n" + "".join(f"t{i},x{i}\n" for i in range(8)))
    assert run(cli, ["tasks", "load", "g", str(tasks)], env=env).exit_code == 0
    gold = tmp_path / "gold.csv"
    gold.write_text("id,text,answer\nnew1,y,a\n" + "".join(f"t{i},x{i},b\n" for i in range(7)))
    res = run(cli, ["gold", "load", "g", str(gold)], env=env)
    assert res.exit_code == 5, res.output
    assert "7 of these gold questions have ids already loaded as tasks" in res.stderr
    assert "'t0', 't1', 't2', 't3', 't4', ..." in res.stderr and "line 3" in res.stderr
    assert "ids of their own" in res.stderr
    out = json.loads(run(cli, ["status", "g", "-o", "json"], env=env).stdout)
    assert out["tasks"]["gold"] == 0 and out["tasks"]["unlabeled"] == 8  # nothing loaded
    # (and tasks with ids of gold questions are refused the same way)
    ok = tmp_path / "ok.csv"
    ok.write_text("id,text,answer\ngold-1,y,a\n")
    assert run(cli, ["gold", "load", "g", str(ok)], env=env).exit_code == 0
    again = tmp_path / "again.csv"
    again.write_text("id,text\ngold-1,z\n")
    res = run(cli, ["tasks", "load", "g", str(again)], env=env)
    assert res.exit_code == 5 and "already loaded as gold questions" in res.stderr
    # while loading the same gold twice still skips it
    res = run(cli, ["gold", "load", "g", str(ok)], env=env)
    assert res.exit_code == 0 and "1 already present, skipped" in res.stdout
