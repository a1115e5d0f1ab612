"""``bench/peers.py --quick`` runs, so the peer benchmark's harness cannot rot unnoticed.

The labelq half always runs (a real ``labelq serve`` + ``labelq run-worker`` on free ports, Redis
at ``LABELQ_TEST_REDIS_URL``, its record on PostgreSQL: the bench's own private cluster where
PostgreSQL's server binaries are here, else a fresh schema at ``LABELQ_TEST_POSTGRES_URL``).
The Label Studio half needs Label Studio, which lives in a venv of its own (its pins conflict
with labelq's), with its ``uwsgi`` extra: ``LABELQ_TEST_LABEL_STUDIO_BIN`` names its launcher,
else ``label-studio`` on PATH; without either it is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _postgres() -> str:
    """``private`` where the bench can start a cluster of its own, else the tests' server."""
    from bench import peers
    try:
        peers._pg_bindir()
        return "private"
    except SystemExit:
        url = os.environ.get("LABELQ_TEST_POSTGRES_URL",  # as conftest.py reads it
                             "postgresql+psycopg://postgres@127.0.0.1:5432/test")
        return url.replace("postgresql+psycopg://", "postgresql://", 1)


def test_quick_labelq_half(redis_url, capsys):
    from bench import peers
    postgres = _postgres()
    results, exports = peers.main(["--quick", "--systems", "labelq", "--redis-url", redis_url,
                                   "--postgres", postgres, "--warmup", "1"])
    by = {res["system"]: res for _, res in results}
    assert set(by) == {"labelq (overlap 3)", "labelq (overlap 1)"}
    for overlap, res in ((3, by["labelq (overlap 3)"]), (1, by["labelq (overlap 1)"])):
        assert res["labels"] == 500 * overlap  # every task got all its labels
        assert res["rate"] > 0 and res["next_p50"] <= res["next_p99"]
        assert res["cpu"]["api"] > 0 and res["retried"] == 0
        if postgres == "private":  # the private server's CPU is charged to the phase (at
            assert "postgres" in res["cpu"]  # 500 tasks it can be below one clock tick)
    [(_, ex)] = exports  # every task labelled once, and both exports carry them all
    assert ex["labels"] == 500
    assert ex["export"]["per_task"][1] == 500 and ex["export"]["labels"][1] == 500
    out = capsys.readouterr().out
    assert "| 1 | labelq (overlap 3) | 1,500 |" in out


def _label_studio_bin() -> str | None:
    return os.environ.get("LABELQ_TEST_LABEL_STUDIO_BIN") or shutil.which("label-studio")


@pytest.mark.slow
@pytest.mark.skipif(_label_studio_bin() is None
                    and importlib.util.find_spec("label_studio") is None,
                    reason="Label Studio is not installed here (it needs a venv of its own: "
                           "README, 'Side by side with Label Studio'); set "
                           "LABELQ_TEST_LABEL_STUDIO_BIN")
def test_quick_label_studio_half(redis_url):
    """Label Studio's production setup: uWSGI (master, HTTP router, workers) on PostgreSQL,
    which answers no 5xx (on SQLite its runserver answered 'database is locked')."""
    from bench import peers
    postgres = _postgres()
    results, exports = peers.main(["--quick", "--systems", "ls", "--label-studio-bin",
                                   _label_studio_bin() or "label-studio",
                                   "--redis-url", redis_url, "--postgres", postgres])
    by = {res["system"]: res for _, res in results}
    assert set(by) == {"Label Studio (overlap 3)", "Label Studio (overlap 1)"}
    for res in by.values():
        assert res["labels"] > 0 and res["retried"] == 0
        assert res["procs"] >= 3  # uWSGI, not runserver's one process
        assert res["cpu"]["server"] > 0
        if postgres == "private":
            assert res["cpu"]["postgres"] > 0
    [(_, ex)] = exports
    assert ex["export"]["per_task"][1] == 500 and ex["export"]["labels"][1] == 500
