"""`labelq demo`, the README's main job, end to end in a subprocess: on a real Redis, and
on the embedded one when no Redis is configured and no redis-server is installed."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_demo(env_extra: dict, tmp_path: Path, path: str | None = None,
             where: tuple[str, ...] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    if path is not None:
        env["PATH"] = path
    where = ("--out", str(tmp_path / "out")) if where is None else where
    res = subprocess.run([sys.executable, "-m", "cli.main", "demo", "--tasks", "90",
                          "--gold", "9", "--workers", "6", *where],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def check_report(out: str, tmp_path: Path, min_labelled: int = 90) -> None:
    labelled = re.search(r"Tasks labelled: (\d+)/90", out)
    assert labelled and int(labelled.group(1)) >= min_labelled, out
    for name in (r"posterior \(auto\)", "majority vote", "Dawid-Skene, gold clamped",
                 "Dawid-Skene without paused annotators"):
        acc = re.search(name + r"\s+([0-9.]+)", out)
        assert acc and float(acc.group(1)) > 0.6, (name, out)
    assert re.search(r"Celery applied every label", out), out
    answers = (tmp_path / "out" / "answers.csv").read_text().splitlines()
    assert len(answers) == 91, answers[:3]
    assert answers[0] == ("task,category,label,confidence,n_labels,source,evidence,p_yes,p_no,"
                          "payload.text")
    labels = (tmp_path / "out" / "labels.csv").read_text().splitlines()
    n_labels = re.search(r"the (\d+) labels \((\d+) on gold\)", out)
    assert n_labels and len(labels) == int(n_labels.group(1)) + 1, out
    assert int(n_labels.group(2)) > 0  # the gold schedule injected gold
    # (what the careless annotators' gold said, and which the rule paused)
    assert re.search(r"paused (\d) of the 2 careless annotators and \d+ of the 4 others", out)
    assert "careless annotators' gold answers right/answered" in out
    # the exports are those of `labelq export demo` and `labelq export demo --raw`
    db = f"sqlite:///{tmp_path / 'out' / 'demo.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env["PYTHONPATH"] = str(ROOT)
    # (the second from the kept folder, whose labelq.toml names its database)
    assert (tmp_path / "out" / "labelq.toml").is_file()
    for args, name, cwd in ((["demo", "--database-url", db], "answers.csv", tmp_path),
                            (["demo", "--raw"], "labels.csv", tmp_path / "out")):
        res = subprocess.run([sys.executable, "-m", "cli.main", "export", *args], cwd=cwd,
                             env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout == (tmp_path / "out" / name).read_text(), name


@pytest.mark.timeout(300)
def test_demo_on_a_real_redis(redis_url, tmp_path):
    out = run_demo({"LABELQ_REDIS_URL": redis_url}, tmp_path)
    assert "embedded" not in out and "private redis-server" not in out
    check_report(out, tmp_path)


@pytest.mark.timeout(300)
def test_demo_with_a_relative_out_folder(redis_url, tmp_path):
    # `--out out` from the caller's folder: the Celery worker (started from another folder)
    # must find the same database, or no label is applied and nobody is paused
    out = run_demo({"LABELQ_REDIS_URL": redis_url}, tmp_path, where=("--out", "out"))
    check_report(out, tmp_path)
    con = sqlite3.connect(tmp_path / "out" / "demo.db")
    try:
        unapplied = con.execute("SELECT count(*) FROM label WHERE applied_seq IS NULL")
        assert unapplied.fetchone() == (0,)
    finally:
        con.close()


@pytest.mark.timeout(300)
def test_demo_keeps_no_temporary_folder_unless_asked(redis_url, tmp_path):
    # Without --out or --keep, the demo works in a temporary folder and deletes it
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = run_demo({"LABELQ_REDIS_URL": redis_url, "TMPDIR": str(tmp)}, tmp_path, where=())
    assert list(tmp.iterdir()) == [], out
    assert "run with --keep or --out DIR" in out and "Tasks labelled" in out
    # and its keys with it: no home of the deleted database (which `labelq check` of the
    # operator's next database on this Redis counted as another database sharing it), no
    # bindings of its Celery queue
    import redis
    client = redis.Redis.from_url(redis_url)
    try:
        left = sorted(k.decode() for k in client.scan_iter(count=1000))
    finally:
        client.close()
    assert [k for k in left if k.startswith("lq:") or "labelq-demo" in k] == [], left


@pytest.mark.timeout(300)
def test_demo_without_any_redis_runs_embedded(tmp_path):
    # no LABELQ_REDIS_URL and no redis-server on PATH: the in-process server takes over
    out = run_demo({}, tmp_path, path=str(Path(sys.executable).parent))
    assert "No Redis configured" in out and "embedded in-process Redis" in out
    # the embedded server is slower and spreads labels less evenly (see the issue notes)
    check_report(out, tmp_path, min_labelled=60)


def test_demo_without_redis_nor_fakeredis_says_what_to_install(tmp_path, monkeypatch):
    # fakeredis is the `embedded` extra, not a runtime requirement: where no Redis is
    # configured, no redis-server is installed and fakeredis is absent, the demo says
    # what to install instead of failing with an ImportError
    from click.testing import CliRunner

    from cli.main import cli

    monkeypatch.setitem(sys.modules, "fakeredis", None)  # as if not installed
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server
    monkeypatch.delenv("LABELQ_REDIS_URL", raising=False)
    res = CliRunner().invoke(cli, ["demo", "--tasks", "9", "--gold", "1", "--workers", "2",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 9, res.output
    assert "No Redis configured" in res.output
    assert "LABELQ_REDIS_URL" in res.output and "redis-server" in res.output
    assert "'.[embedded]'" in res.output
    assert not isinstance(res.exception, ImportError)
