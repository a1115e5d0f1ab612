import json

import pytest
from click.testing import CliRunner

from cli.main import cli
from cli.simulate import parse_budgets
from labelq.errors import InputError
from labelq.simulate.experiment import EnvSource, run_experiment

SPEC = "tasks=30,workers=6,model=one-coin,p=0.8,theta=uniform"


def test_parse_budgets():
    assert parse_budgets("1..4") == [1, 2, 3, 4]
    assert parse_budgets("8,1,2,4") == [1, 2, 4, 8]
    assert parse_budgets("0.5,2..3") == [0.5, 2, 3]
    for bad in ("", "a", "3..1", "-1"):
        with pytest.raises(InputError, match="--budget-per-task"):
            parse_budgets(bad)


def test_json_shape_table_and_plot(tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--policy", "uniform", "--budget-per-task", "1,2,4",
        "--runs", "3", "--json", str(out), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "uniform" in result.output and "±" in result.output
    data = json.loads(out.read_text())
    assert list(data) == ["policies"]
    [pol] = data["policies"]
    assert pol["spec"] == "uniform"
    assert [p["budget_per_task"] for p in pol["points"]] == [1, 2, 4]
    for p in pol["points"]:
        assert set(p) == {"budget_per_task", "labels", "accuracy_mean", "accuracy_se", "runs",
                          "spent_mean", "tasks_completed_mean"}
        assert p["runs"] == 3 and p["labels"] == 30 * p["budget_per_task"]
        assert p["spent_mean"] == p["labels"] and 0 <= p["accuracy_mean"] <= 1
    assert pol["points"][0]["tasks_completed_mean"] == 30
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_output_json_prints_one_document_and_progress_is_logged(tmp_path):
    # -o json and --json print the results (as --out writes them) and nothing else on
    # stdout; off a terminal, progress is logged on stderr as lines, not a bar
    args = ["simulate", "--synthetic", SPEC, "--policy", "uniform", "--budget-per-task",
            "1,2", "--runs", "2"]
    out = tmp_path / "r.json"
    a = CliRunner().invoke(cli, [*args, "-o", "json", "--out", str(out)])
    b = CliRunner().invoke(cli, [*args, "--json"])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert json.loads(a.stdout) == json.loads(b.stdout) == json.loads(out.read_text())
    assert "simulating: 2/2 runs (100%)" in a.stderr
    assert "simulating: 0/" not in a.stderr and "\r" not in a.stderr
    md = CliRunner().invoke(cli, [*args, "-o", "markdown"])
    assert md.exit_code == 0 and "| uniform" in md.stdout


def test_jobs_do_not_change_the_numbers():
    src = EnvSource("synthetic", SPEC)
    a = run_experiment(src, ["uniform"], [1, 3], runs=4, seed=9, jobs=1).to_dict()
    b = run_experiment(src, ["uniform"], [1, 3], runs=4, seed=9, jobs=2).to_dict()
    assert a == b


@pytest.mark.parametrize("args, code, message", [
    (["--policy", "uniform"], 2, "exactly one of --data DIR or --synthetic SPEC"),
    (["--synthetic", "tasks=0", "--policy", "uniform"], 3, "tasks must be an integer >= 1"),
    (["--synthetic", SPEC, "--policy", "nope"], 8, "unknown policy 'nope'"),
    (["--synthetic", SPEC, "--policy", "uniform", "--budget-per-task", "x"], 3,
     "--budget-per-task"),
])
def test_errors(args, code, message):
    result = CliRunner().invoke(cli, ["simulate", *args])
    assert result.exit_code == code, result.output
    assert message in result.output


def test_replay_from_the_cli(shared_datasets, tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, [
        "simulate", "--data", str(shared_datasets / "temp"), "--policy", "uniform",
        "--budget-per-task", "10", "--runs", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [point] = json.loads(out.read_text())["policies"][0]["points"]
    assert point["spent_mean"] == 4620 and point["accuracy_se"] == 0.0


def test_shuffle_replays_another_order_each_run(shared_datasets, tmp_path):
    """--shuffle: the same labels, so a policy that uses them all scores the same, while a
    run of one that takes workers by index differs from the file's order."""
    def run(policy, budget, *extra):
        out = tmp_path / "s.json"
        result = CliRunner().invoke(cli, [
            "simulate", "--data", str(shared_datasets / "bluebirds"), "--policy", policy,
            "--budget-per-task", budget, "--runs", "3", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        return json.loads(out.read_text())["policies"][0]["points"][0]
    plain, mixed = run("optkg-workers", "1"), run("optkg-workers", "1", "--shuffle")
    assert plain["accuracy_se"] == 0.0  # deterministic in the file's order
    assert mixed["accuracy_se"] > 0.0  # a new order each run
    every = run("uniform", "39", "--shuffle")
    assert every["spent_mean"] == 108 * 39 and every["accuracy_se"] < 1e-9  # every label


def test_aggregate_option_adds_a_second_accuracy(tmp_path):
    pytest.importorskip("labelq.aggregation")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--policy", "uniform", "--budget-per-task", "3",
        "--runs", "2", "--aggregate", "mv", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "uniform + mv" in result.output
    [point] = json.loads(out.read_text())["policies"][0]["points"]
    assert 0 <= point["aggregate_accuracy_mean"] <= 1


def test_mode_override_runs_a_push_policy_in_pull_mode():
    src = EnvSource("synthetic", SPEC)
    exp = run_experiment(src, ["uniform"], [2], runs=2, seed=0, mode="push")
    assert exp.to_dict()["policies"][0]["points"][0]["spent_mean"] == 60


def test_mode_task_on_the_command_line():
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--policy", "optkg", "--budget-per-task", "2",
        "--runs", "2", "--mode", "task"])
    assert result.exit_code == 0, result.output
    assert "mode task" in result.output
    bad = CliRunner().invoke(cli, ["simulate", "--synthetic", SPEC, "--policy", "optkg",
                                   "--mode", "sideways"])
    assert bad.exit_code != 0 and "sideways" in bad.output


def test_plot_without_matplotlib_says_what_to_install_before_running(tmp_path, monkeypatch):
    # matplotlib is the `plot` extra: without it --plot stops at once (exit 2, usage or
    # configuration) with what to install, before the runs and before writing the JSON
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--policy", "uniform", "--budget-per-task", "1",
        "--runs", "1", "--out", str(out), "--plot", str(png)])
    assert result.exit_code == 2, result.output
    assert "matplotlib" in result.output and "'.[plot]'" in result.output
    assert "simulating" not in result.output
    assert not out.exists() and not png.exists()


@pytest.mark.parametrize("what", ["missing", "file", "empty folder"])
def test_data_that_is_not_a_data_set_folder_exits_3(tmp_path, what):
    data = tmp_path / "data"
    if what == "file":
        data.write_text("x")
    elif what == "empty folder":
        data.mkdir()
    result = CliRunner().invoke(cli, ["simulate", "--data", str(data), "--policy", "uniform"])
    assert result.exit_code == 3, result.output
    assert f"{data}: no labels.csv" in result.output


def test_data_without_truth_exits_3_saying_what_simulate_needs_it_for(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "labels.csv").write_text("task,worker,label\n1,a,x\n1,b,y\n")
    result = CliRunner().invoke(cli, ["simulate", "--data", str(data), "--policy", "uniform"])
    assert result.exit_code == 3, result.output
    assert f"{data}: no truth.csv" in result.output and "labelq aggregate" in result.output


def _dataset_with_predictions(tmp_path, rows=None):
    """A small replayable data set (200 tasks, 4 workers who labelled everything) and a
    model's predictions.csv, right on 180 of the 200 tasks."""
    import numpy as np
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 200)
    names = ["neg", "pos"]
    labels = ["task,worker,label"]
    for i, y in enumerate(truth):
        for j in range(4):
            z = y if rng.random() < 0.75 else 1 - y
            labels.append(f"t{i},w{j},{names[z]}")
    (tmp_path / "labels.csv").write_text("\n".join(labels) + "\n")
    (tmp_path / "truth.csv").write_text(
        "task,truth\n" + "".join(f"t{i},{names[y]}\n" for i, y in enumerate(truth)))
    if rows is None:
        rows = []
        for i, y in enumerate(truth):
            p = 0.9 if i % 10 else 0.2  # wrong on every tenth task
            rows.append(f"t{i},{1 - p if y else p:.2f},{p if y else 1 - p:.2f}")
    pred = tmp_path / "predictions.csv"
    pred.write_text("task,p_neg,p_pos\n" + "\n".join(rows) + "\n")
    return tmp_path, pred


def test_predictions_run_each_policy_with_and_without_the_model(tmp_path):
    data, pred = _dataset_with_predictions(tmp_path)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, [
        "simulate", "--data", str(data), "--predictions", str(pred), "--policy", "auto",
        "--budget-per-task", "1,2", "--runs", "2", "--shuffle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "the model alone: accuracy 0.9000" in result.output
    assert "auto +model" in result.output
    doc = json.loads(out.read_text())
    assert doc["model_alone_accuracy"] == pytest.approx(0.9)
    rows = {p["spec"]: p["points"] for p in doc["policies"]}
    assert set(rows) == {"auto", "auto +model"}
    # the budget counts human labels only: the model's predictions are not labels
    for spec in rows:
        assert [p["spent_mean"] for p in rows[spec]] == [200, 400]
    # the model's evidence lifts the answers above the labels alone
    for k in (0, 1):
        assert rows["auto +model"][k]["accuracy_mean"] > rows["auto"][k]["accuracy_mean"]


@pytest.mark.parametrize("rows, where", [
    (["t0,0.5,0.5", "t999,0.5,0.5"], "line 3, field 'task'"),
    (["t0,0.5,0.5", "t1,abc,0.5"], "line 3, field 'p_neg'"),
    (["t0,-0.1,1.1"], "line 2, field 'p_neg'"),
    (["t0,0.5,0.4"], "line 2, field 'p_*'"),
    (["t0,0.5,0.5", "t0,0.5,0.5"], "line 3, field 'task'"),
])
def test_bad_predictions_files_are_refused_with_file_line_and_field(tmp_path, rows, where):
    data, pred = _dataset_with_predictions(tmp_path, rows)
    result = CliRunner().invoke(cli, [
        "simulate", "--data", str(data), "--predictions", str(pred), "--policy", "auto",
        "--budget-per-task", "1", "--runs", "1"])
    assert result.exit_code == 3, result.output
    assert f"{pred}, {where}" in result.output


def test_predictions_without_a_class_column_or_data_are_refused(tmp_path):
    data, pred = _dataset_with_predictions(tmp_path)
    pred.write_text("task,p_neg\nt0,1.0\n")
    result = CliRunner().invoke(cli, [
        "simulate", "--data", str(data), "--predictions", str(pred), "--policy", "auto",
        "--budget-per-task", "1", "--runs", "1"])
    assert result.exit_code == 3 and "line 1, field 'p_pos'" in result.output
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--predictions", str(pred), "--policy", "auto",
        "--budget-per-task", "1", "--runs", "1"])
    assert result.exit_code == 2 and "--predictions needs --data" in result.output
