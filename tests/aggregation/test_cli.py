"""``labelq aggregate`` end to end on small files."""

import csv
import json

import pytest
from click.testing import CliRunner

from cli.main import cli


@pytest.fixture
def files(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("task,worker,label\nq1,ann,yes\nq1,bob,yes\nq1,cy,no\n"
                      "q2,ann,no\nq2,bob,no\nq3,cy,yes\n")
    truth = tmp_path / "truth.csv"
    truth.write_text("task,truth\nq1,yes\nq2,yes\n")
    return labels, truth


def test_csv_output_with_original_label_values(files, tmp_path):
    labels, _ = files
    out = tmp_path / "agg.csv"
    r = CliRunner().invoke(cli, ["aggregate", str(labels), "--method", "mv", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open()))
    assert [row["task"] for row in rows] == ["q1", "q2", "q3"]
    assert [row["label"] for row in rows] == ["yes", "no", "yes"]
    assert [row["n_labels"] for row in rows] == ["3", "2", "1"]
    q3 = rows[2]
    assert float(q3["confidence"]) < 1.0  # one label is not certainty
    assert float(q3["p_no"]) + float(q3["p_yes"]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("method", ["mv", "wmv", "ds", "onecoin", "glad", "kos", "ds-category",
                                    "auto"])
def test_json_summary_reports_accuracy(files, method):
    labels, truth = files
    r = CliRunner().invoke(cli, ["aggregate", str(labels), "-m", method, "--truth", str(truth),
                                 "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["method"] == method and summary["n_tasks"] == 3 and summary["n_truth"] == 2
    assert summary["chosen"] in ("mv", "wmv", "onecoin", "ds") if method == "auto" \
        else summary["chosen"] == method
    assert summary["accuracy"] in (0.0, 0.5, 1.0)
    assert sum(summary["class_counts"].values()) == 3


def test_accuracy_counts_a_tie_as_a_uniform_tie_break(tmp_path):
    # Given two tasks whose votes tie 1:1, both truly the first class in label order
    labels = tmp_path / "tie.csv"
    labels.write_text("task,worker,label\nt1,u,a\nt1,v,b\nt2,u,a\nt2,v,b\nt3,u,b\n")
    truth = tmp_path / "truth.csv"
    truth.write_text("task,truth\nt1,a\nt2,a\nt3,b\n")
    # When majority vote aggregates them against the truth
    r = CliRunner().invoke(cli, ["aggregate", str(labels), "-m", "mv", "--truth", str(truth),
                                 "--json"])
    s = json.loads(r.output)
    # Then each tie scores 1/2, not the 1 its lowest-index label 'a' would give
    assert s["accuracy"] == pytest.approx((0.5 + 0.5 + 1) / 3) and s["ties_with_truth"] == 2
    r = CliRunner().invoke(cli, ["aggregate", str(labels), "-m", "mv", "--truth", str(truth),
                                 "--out", str(tmp_path / "o.csv")])
    assert "accuracy: 0.6667 on 3 tasks with truth (2 tied, each counted 1/k)" in r.output


def test_errors_name_file_line_and_field(files, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("task,worker,label\nq1,ann,yes\nq2,,no\n")
    r = CliRunner().invoke(cli, ["aggregate", str(bad)])
    assert r.exit_code == 3
    assert f"{bad}, line 3, field 'worker'" in r.output
    r = CliRunner().invoke(cli, ["aggregate", str(tmp_path / "missing.csv")])
    assert r.exit_code == 3 and "cannot read" in r.output
    weights = tmp_path / "w.csv"
    weights.write_text("worker,weight\nann,2\nbob,x\n")
    r = CliRunner().invoke(cli, ["aggregate", str(files[0]), "-m", "wmv", "--weights", str(weights)])
    assert r.exit_code == 3 and "line 3, field 'weight'" in r.output


def test_athlete_with_categories(shared_datasets):
    d = shared_datasets / "athlete"
    r = CliRunner().invoke(cli, ["aggregate", str(d / "labels.csv"), "-m", "ds-category",
                                 "--categories", str(d / "task_types.csv"),
                                 "--truth", str(d / "truth.csv"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["accuracy"] >= 0.99


def test_columns_under_other_names_are_read_and_a_missing_one_names_them(files, tmp_path):
    # Given the same labels and truth with the column names other tools export
    # (crowd-kit's, Toloka's, a spreadsheet's capitals), one truth left empty
    labels, truth = files
    alt_labels = tmp_path / "alt.csv"
    alt_labels.write_text(labels.read_text().replace("task,worker,label",
                                                     "Item,annotator_id,Response"))
    alt_truth = tmp_path / "alt_truth.csv"
    alt_truth.write_text("item,label\nq1,yes\nq2,yes\nq3,\n")
    # Then aggregating them gives what the canonical names give, and the empty truth
    # is unknown (two tasks scored), not a class named ''
    outs = []
    for lab, tru in ((labels, truth), (alt_labels, alt_truth)):
        r = CliRunner().invoke(cli, ["aggregate", str(lab), "-m", "mv", "--truth", str(tru),
                                     "-o", "json"])
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.output))
    assert outs[1]["accuracy"] == outs[0]["accuracy"]
    assert outs[1]["n_tasks"] == outs[0]["n_tasks"] == 3
    assert outs[1]["n_truth"] == outs[0]["n_truth"] == 2
    assert outs[1]["classes"] == outs[0]["classes"] == ["no", "yes"]
    # and a column under no known name is refused, naming what would have been accepted
    bad = tmp_path / "bad.csv"
    bad.write_text("item,annotator,verdict\nq1,ann,yes\n")
    r = CliRunner().invoke(cli, ["aggregate", str(bad)])
    assert r.exit_code == 3
    assert f"{bad}, line 1, field 'label': missing column" in r.output
    assert "also accepted for 'label': response, answer" in r.output


def test_json_summary_says_whether_confidences_are_calibrated(shared_datasets, tmp_path):
    """Issue 41: with 100 truths as gold (random: the first 100 tasks of rte) ``auto``
    reports an exact interval and calibrated confidences; without gold, neither."""
    d = shared_datasets / "rte"
    truth = tmp_path / "truth.csv"
    truth.write_text("".join((d / "truth.csv").read_text().splitlines(keepends=True)[:101]))
    args = ["aggregate", str(d / "labels.csv"), "--truth", str(truth), "--json"]
    without = json.loads(CliRunner().invoke(cli, args).output)
    assert without["calibration"]["calibrated"] is False
    est = without["accuracy_estimate"]
    assert est["basis"] == "models" and est["low"] is None and est["audit_n"] > 50
    r = CliRunner().invoke(cli, [*args, "--gold"])
    assert r.exit_code == 0, r.output
    with_gold = json.loads(r.output)
    assert with_gold["calibration"]["calibrated"] is True
    assert with_gold["calibration"]["answers"] == 100
    est = with_gold["accuracy_estimate"]
    assert est["basis"] == "gold" and est["n_gold"] == 100 and est["n_tasks"] == 700
    assert 0 < est["low"] < est["estimate"] < est["high"] <= 1
