"""What ``labelq aggregate`` takes and refuses (issue 45): a repeated (task, worker) pair
counted as several votes, a truth file naming a task twice, a truth file sharing no task
with the labels, and a JSONL file read as a malformed CSV."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli.main import cli
from labelq.datasets import read_labels

ROWS = [(f"t{i}", f"w{j}", str((i + j) % 2 if j < 2 else i % 2))
        for i in range(8) for j in range(3)]


def write_csv(path, rows, header=("task", "worker", "label")):
    path.write_text("\n".join([",".join(header)] + [",".join(r) for r in rows]) + "\n")
    return path


def aggregate(*args):
    return CliRunner().invoke(cli, ["aggregate", *map(str, args)])


def test_a_repeated_pair_counts_once_with_a_warning(tmp_path):
    # Given a worker's label on a task given again three times with the other label
    # (enough to outvote the other two workers, counted as votes)
    plain = write_csv(tmp_path / "plain.csv", ROWS)
    t0 = [r for r in ROWS if r[0] == "t0"]
    other = "1" if t0[0][2] == "0" else "0"
    repeated = write_csv(tmp_path / "repeated.csv",
                         ROWS + [(t0[0][0], t0[0][1], other)] * 3)
    for method in ("mv", "ds"):
        want = aggregate(plain, "-m", method)
        got = aggregate(repeated, "-m", method)
        # Then the result is the file's without the repeats: the first label counts once
        assert got.exit_code == 0, got.output
        assert got.stdout == want.stdout
        assert "warning: 3 repeated (task, worker) pairs counted once" in got.stderr
        assert f"{repeated}, line {len(ROWS) + 2}: task 't0', worker 'w0' again " \
               "(first on line 2)" in got.stderr and "3 with another label" in got.stderr
    summary = json.loads(aggregate(repeated, "--json").stdout)
    assert summary["repeats_dropped"] == 3 and summary["n_labels"] == len(ROWS)
    # (a data set read for the benchmarks keeps them, as before: ds1979's repeated exams)
    assert read_labels(repeated).n_labels == len(ROWS) + 3


def test_a_truth_file_with_a_task_twice_is_refused(tmp_path):
    labels = write_csv(tmp_path / "labels.csv", ROWS)
    truth = tmp_path / "truth.csv"
    truth.write_text("task,truth\nt0,0\nt1,1\nt0,1\n")
    res = aggregate(labels, "--truth", truth, "--json")
    assert res.exit_code == 3, res.output
    assert f"{truth}, line 4, field 'task'" in res.output
    assert "'t0' is given a truth twice (first on line 2)" in res.output


def test_a_truth_file_sharing_no_task_is_an_error(tmp_path):
    labels = write_csv(tmp_path / "labels.csv", ROWS)
    truth = tmp_path / "truth.csv"
    truth.write_text("task,truth\nx0,0\nx1,1\n")
    res = aggregate(labels, "--truth", truth, "--json")
    assert res.exit_code == 3, res.output
    assert f"{truth}: no task with a truth is in {labels}" in res.output
    assert "'x0', 'x1'" in res.output
    # (one shared task is enough)
    truth.write_text("task,truth\nx0,0\nt1,1\n")
    res = aggregate(labels, "--truth", truth, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["n_truth"] == 1


def test_a_jsonl_file_is_read_as_jsonl_or_refused_by_name(tmp_path):
    csv_file = write_csv(tmp_path / "labels.csv", ROWS)
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text("".join(json.dumps({"item": t, "annotator": w, "response": int(v)})
                             + "\n" for t, w, v in ROWS))
    want = aggregate(csv_file, "--json")
    got = aggregate(jsonl, "--json")
    assert got.exit_code == 0, got.output
    a, b = json.loads(want.stdout), json.loads(got.stdout)
    assert {k: v for k, v in a.items() if k != "file"} == \
        {k: v for k, v in b.items() if k != "file"}
    # a JSONL file named .csv: refused by name, not read as a malformed CSV
    named = tmp_path / "wrong.csv"
    named.write_text(jsonl.read_text())
    res = aggregate(named)
    assert res.exit_code == 3, res.output
    assert f"{named}, line 1" in res.output and "name it .jsonl" in res.output
    # and under another name, its first character says JSONL
    (tmp_path / "labels.txt").write_text(jsonl.read_text())
    assert json.loads(aggregate(tmp_path / "labels.txt", "--json").stdout)["n_labels"] == \
        len(ROWS)


def test_the_jsonl_reader_refuses_duplicate_keys_and_1_mib_fields(tmp_path):
    path = tmp_path / "labels.jsonl"
    good = [json.dumps({"task": t, "worker": w, "label": v}) for t, w, v in ROWS]
    path.write_text("\n".join(good[:3] + ['{"task": "t9", "worker": "w1", "label": "0", '
                                          '"worker": "w2"}'] + good[3:]) + "\n")
    res = aggregate(path)
    assert res.exit_code == 3 and f"{path}, line 4, field 'worker'" in res.output
    assert "given twice" in res.output
    big = json.dumps({"task": "t9", "worker": "w1", "label": "0", "note": "x" * ((1 << 20) + 1)})
    path.write_text("\n".join(good[:3] + [big] + good[3:]) + "\n")
    res = aggregate(path)
    assert res.exit_code == 3 and f"{path}, line 4, field 'note'" in res.output
    assert "1 MiB" in res.output
