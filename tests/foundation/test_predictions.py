"""A model's predictions (issue 42): loaded through the CLI all or nothing (a bad file is
exit 3 naming file, line and field, and leaves nothing), versions, list and remove, the
schema upgrade of ``labelq init``, ``project delete``, and ``read_predictions`` (SQLite and
PostgreSQL)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func, inspect
from sqlmodel import SQLModel, select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import ModelVersion, Prediction, Task
from labelq.record.predictions import load_predictions, parse_source, read_predictions
from labelq.record.problem import load_view
from labelq.record.projects import get_project

LABELS = ["pos", "neg", "neutral"]


@pytest.fixture
def run(db_url, tmp_path):
    runner = CliRunner()

    def invoke(*args, code=0):
        result = runner.invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url},
                               catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    invoke("project", "create", "p", "--labels", ",".join(LABELS))
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,text\n" + "".join(f"t{i},text {i}\n" for i in range(20)))
    invoke("tasks", "load", "p", tasks)
    return invoke


def stored(db_url):
    with session_scope(engine_for(db_url)) as s:
        return (s.exec(select(func.count()).select_from(ModelVersion)).one(),
                s.exec(select(func.count()).select_from(Prediction)).one())


def probs_csv(path, rows, header="id,p_pos,p_neg,p_neutral"):
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


GOOD = [f"t{i},0.5,0.25,0.25" for i in range(10)]


@pytest.mark.parametrize("line,row,field,needle", [
    (5, "t99,0.5,0.25,0.25", "id", "unknown task 't99'"),
    (6, "t2,0.5,0.25,0.25", "id", "duplicate id 't2' (first on line 4)"),
    (7, "t5,nan,0.5,0.5", "p_pos", "NaN is not a probability"),
    (8, "t6,0.5,-0.25,0.75", "p_neg", "negative probability -0.25"),
    (9, "t7,0.5,0.25,1.5", "p_neutral", "probability 1.5 is over 1"),
    (10, "t8,0.5,0.25,0.2", "p_pos+p_neg+p_neutral", "the probabilities sum to 0.95, not 1"),
    (11, "t9,0.5,,0.5", "p_neg", "missing value"),
    (3, "t1,0.5,x,0.5", "p_neg", "not a number: 'x'"),
])
def test_a_bad_row_refuses_the_file(run, db_url, tmp_path, line, row, field, needle):
    # Given a file of good rows but one (the file's line ``line``)
    rows = list(GOOD)
    rows[line - 2] = row
    path = probs_csv(tmp_path / "p.csv", rows)
    # When it is loaded, Then exit 3 names the file, the line and the field, and nothing
    # is stored
    res = run("predictions", "load", "p", path, "--model", "m", code=3)
    assert f"{path}, line {line}, field '{field}': {needle}" in res.output
    assert stored(db_url) == (0, 0)


def test_the_first_problem_in_the_file_is_named(run, tmp_path):
    # an unknown id on line 3 (found in SQL) before a NaN on line 6 (found as read)
    rows = list(GOOD)
    rows[1] = "t77,0.5,0.25,0.25"
    rows[4] = "t4,nan,0.5,0.5"
    res = run("predictions", "load", "p", probs_csv(tmp_path / "p.csv", rows), "--model", "m",
              code=3)
    assert "line 3, field 'id': unknown task 't77'" in res.output


@pytest.mark.parametrize("header,field,needle", [
    ("id,p_pos,p_neg", "p_neutral", "missing class column for 'neutral'"),
    ("id,p_pos,p_neg,p_neutral,p_maybe", "p_maybe", "unknown class 'maybe'"),
    ("id,p_pos,p_neg,p_neutral,note", "note", "unexpected column"),
    ("task,p_pos,p_neg,p_neutral", "id", "missing column"),
    ("id,label", "score", "missing column"),
])
def test_a_bad_header_refuses_the_file(run, db_url, tmp_path, header, field, needle):
    width = header.count(",")
    path = probs_csv(tmp_path / "p.csv", [",".join(["t1"] + ["0.5"] * width)], header)
    res = run("predictions", "load", "p", path, "--model", "m", code=3)
    assert f"{path}, line 1, field '{field}': {needle}" in res.output
    assert stored(db_url) == (0, 0)


@pytest.mark.parametrize("row,field,needle", [
    ({"id": "t1", "p_pos": 0.5, "p_neg": 0.5}, "p_neutral", "missing class 'neutral'"),
    ({"id": "t1", "p_pos": 0.5, "p_neg": 0.5, "p_neutral": 0, "p_x": 0}, "p_x",
     "unknown class 'x'"),
    ({"id": "t1", "p_pos": "0.5", "p_neg": 0.5, "p_neutral": 0}, "p_pos",
     "must be a number, got str"),
    ({"id": "t1", "label": "maybe", "score": 0.9}, "label", "unknown class 'maybe'"),
    ({"id": "t1", "label": "pos", "score": -1}, "score", "negative probability"),
])
def test_jsonl_rows_are_checked_as_csv_rows(run, db_url, tmp_path, row, field, needle):
    first = ({"id": "t0", "label": "pos", "score": 0.5} if "label" in row
             else {"id": "t0", "p_pos": 1, "p_neg": 0, "p_neutral": 0})
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(row) + "\n")
    res = run("predictions", "load", "p", path, "--model", "m", code=3)
    assert f"{path}, line 2, field '{field}': {needle}" in res.output
    assert stored(db_url) == (0, 0)


def test_jsonl_nan_is_refused_naming_its_field(run, db_url, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "t0", "p_pos": NaN, "p_neg": 0.5, "p_neutral": 0.5}\n')
    res = run("predictions", "load", "p", path, "--model", "m", code=3)
    assert f"{path}, line 1, field 'p_pos': NaN is not JSON" in res.output
    assert stored(db_url) == (0, 0)


def test_normalise_divides_by_the_sum_and_says_how_many(run, db_url, tmp_path):
    rows = list(GOOD)
    rows[0] = "t0,0.5,0.25,0.2"   # sums to 0.95
    rows[1] = "t1,0.5,0.5,1"       # sums to 2
    path = probs_csv(tmp_path / "p.csv", rows)
    out = json.loads(run("predictions", "load", "p", path, "--model", "m", "--normalise",
                         "-o", "json").stdout)
    assert out == {"project": "p", "model": "m", "version": 1, "source": "m@v1", "rows": 10,
                   "normalised": 2}
    with session_scope(engine_for(db_url)) as s:
        p = get_project(s, "p")
        got = read_predictions(s, p, task_index=load_view(s, p).task_id)["m@v1"]
    np.testing.assert_allclose(got[0], [0.5 / 0.95, 0.25 / 0.95, 0.2 / 0.95], rtol=1e-6)
    np.testing.assert_allclose(got[1], [0.25, 0.25, 0.5], rtol=1e-6)
    # a row of zeros cannot be normalised
    path = probs_csv(tmp_path / "z.csv", ["t3,0,0,0"])
    res = run("predictions", "load", "p", path, "--model", "m", "--normalise", code=3)
    assert "line 2, field 'p_pos+p_neg+p_neutral': the probabilities are all 0" in res.output
    assert stored(db_url) == (1, 10)


def test_versions_list_and_remove(run, db_url, tmp_path):
    # Given a model loaded twice (a retrained model) and another once
    a = probs_csv(tmp_path / "a.csv", GOOD[:4])
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({"id": f"t{i}", "label": "neg", "score": 0.7}) + "\n"
                         for i in range(6)))
    assert "as m@v1" in run("predictions", "load", "p", a, "--model", "m").output
    assert "as m@v2" in run("predictions", "load", "p", b, "--model", "m").output
    assert "as other@v1" in run("predictions", "load", "p", a, "--model", "other").output
    # Then each is listed with its rows
    listed = json.loads(run("predictions", "list", "p", "-o", "json").output)
    assert [(v["source"], v["rows"]) for v in listed] == [("m@v1", 4), ("m@v2", 6),
                                                        ("other@v1", 4)]
    assert all(v["created"] for v in listed)
    table = run("predictions", "list", "p").output
    assert "m@v2" in table and "rows" in table
    # and read: the latest version of each model, or all
    with session_scope(engine_for(db_url)) as s:
        p = get_project(s, "p")
        index = load_view(s, p).task_id
        latest = read_predictions(s, p, task_index=index)
        every = read_predictions(s, p, task_index=index, all_versions=True)
    assert sorted(latest) == ["m@v2", "other@v1"]
    assert sorted(every) == ["m@v1", "m@v2", "other@v1"]
    np.testing.assert_allclose(latest["m@v2"][5], [0.15, 0.7, 0.15], rtol=1e-6)
    assert np.isnan(latest["m@v2"][6:]).all() and not np.isnan(latest["m@v2"][:6]).any()
    # When a version is removed, the model's other versions stay
    assert "removed m@v1 (4 predictions)" in run("predictions", "remove", "p", "--model", "m",
                                                 "--version", "1").output
    assert stored(db_url) == (2, 10)
    run("predictions", "remove", "p", "--model", "m", "--version", "1", code=4)
    # and without --version every version of the model goes
    gone = json.loads(run("predictions", "remove", "p", "--model", "m", "-o", "json").stdout)
    assert gone == {"project": "p", "model": "m", "versions": [2], "sources": ["m@v2"],
                    "rows": 6}
    assert [v["source"] for v in json.loads(run("predictions", "list", "p", "-o",
                                                "json").output)] == ["other@v1"]
    run("predictions", "remove", "p", "--model", "m", code=4)
    # a new load after a removal does not reuse a version still listed
    assert "as other@v2" in run("predictions", "load", "p", a, "--model", "other").output


def test_model_name_and_empty_file(run, tmp_path):
    a = probs_csv(tmp_path / "a.csv", GOOD[:2])
    assert "'@' separates" in run("predictions", "load", "p", a, "--model", "m@v1",
                                  code=3).output
    assert "is not allowed" in run("predictions", "load", "p", a, "--model", "a b",
                                   code=3).output
    empty = probs_csv(tmp_path / "e.csv", [])
    assert "line 1: no rows to load" in run("predictions", "load", "p", empty, "--model", "m",
                                            code=3).output
    assert parse_source("my.model@v12") == ("my.model", 12)


def test_read_predictions_follows_the_task_index(run, db_url, tmp_path):
    # rows given out of order, some tasks without one, classes in the label set's order
    rows = ["t7,0.1,0.2,0.7", "t0,1,0,0", "t3,0.2,0.5,0.3"]
    run("predictions", "load", "p", probs_csv(tmp_path / "p.csv", rows,
                                              "id,p_neutral,p_pos,p_neg"), "--model", "m")
    with session_scope(engine_for(db_url)) as s:
        p = get_project(s, "p")
        view = load_view(s, p)
        by_seq = read_predictions(s, p, task_index=view.task_id)["m@v1"]
        ids = {t.external_id: t.id for t in s.exec(select(Task))}
        # any index: a subset in another order, and an id the model has no row for
        index = [ids["t3"], ids["t19"], ids["t7"]]
        subset = read_predictions(s, p, task_index=index)["m@v1"]
        none = read_predictions(s, p, task_index=[])["m@v1"]
    assert by_seq.shape == (20, 3) and by_seq.dtype == np.float64
    np.testing.assert_allclose(by_seq[7], [0.2, 0.7, 0.1], rtol=1e-6)  # pos, neg, neutral
    np.testing.assert_allclose(by_seq[0], [0, 0, 1])
    np.testing.assert_allclose(by_seq[3], [0.5, 0.3, 0.2], rtol=1e-6)
    assert np.isnan(by_seq[[1, 2, 4, 5, 6, 8]]).all()
    assert np.isnan(by_seq).all(axis=1).sum() == 17
    np.testing.assert_allclose(subset[0], by_seq[3])
    np.testing.assert_allclose(subset[2], by_seq[7])
    assert np.isnan(subset[1]).all()
    assert none.shape == (0, 3)


def test_project_delete_removes_predictions(run, db_url, redis_url, tmp_path):
    run("predictions", "load", "p", probs_csv(tmp_path / "p.csv", GOOD), "--model", "m")
    assert stored(db_url) == (1, 10)
    res = CliRunner().invoke(cli, ["project", "delete", "p", "--yes"],
                             env={"LABELQ_DATABASE_URL": db_url, "LABELQ_REDIS_URL": redis_url},
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert stored(db_url) == (0, 0)


def test_init_adds_the_tables_to_an_older_database(db_url):
    # Given a database of an earlier labelq (no model tables)
    engine = engine_for(db_url)
    for name in ("prediction", "model_version"):
        SQLModel.metadata.tables[name].drop(engine)
    assert "prediction" not in inspect(engine).get_table_names()
    # When labelq init runs again, Then they are there, with their index
    init_schema(engine)
    insp = inspect(engine)
    assert {"prediction", "model_version"} <= set(insp.get_table_names())
    assert "ix_prediction_task" in {ix["name"] for ix in insp.get_indexes("prediction")}


def test_load_in_the_callers_transaction(db_url, tmp_path):
    # a load whose caller rolls back leaves nothing (the temporary table included)
    engine = engine_for(db_url)
    with session_scope(engine) as s:
        from labelq.record.projects import create_project
        p = create_project(s, "q", "a,b")
        s.add(Task(project_id=p.id, seq=0, external_id="x"))
    path = probs_csv(tmp_path / "p.csv", ["x,0.3,0.7"], "id,p_a,p_b")
    with pytest.raises(RuntimeError), session_scope(engine) as s:
        load_predictions(s, get_project(s, "q"), path, model="m")
        raise RuntimeError("the caller fails after")
    assert stored(db_url) == (0, 0)
    with session_scope(engine) as s:
        assert load_predictions(s, get_project(s, "q"), path, model="m").version == 1
        assert load_predictions(s, get_project(s, "q"), path, model="m").version == 2
    assert stored(db_url) == (2, 2)
