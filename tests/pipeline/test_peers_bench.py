"""``bench/peers.py --quick`` runs, so the peer benchmark's harness cannot rot unnoticed.

The labelq half always runs (a real ``labelq serve`` + ``labelq run-worker`` on free ports, Redis
at ``LABELQ_TEST_REDIS_URL``); the Label Studio half needs Label Studio, which lives in a venv
of its own (its pins conflict with labelq's): ``LABELQ_TEST_LABEL_STUDIO_BIN`` names its
launcher, else ``label-studio`` on PATH; without either it is skipped.
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


def test_quick_labelq_half(redis_url, capsys):
    from bench import peers
    results, exports = peers.main(["--quick", "--systems", "labelq", "--redis-url", redis_url])
    by = {res["system"]: res for _, res in results}
    assert set(by) == {"labelq (overlap 3)", "labelq (overlap 1)"}
    for overlap, res in ((3, by["labelq (overlap 3)"]), (1, by["labelq (overlap 1)"])):
        assert res["labels"] == 500 * overlap  # every task got all its labels
        assert res["rate"] > 0 and res["next_p50"] <= res["next_p99"]
        assert res["cpu"]["api"] > 0 and res["retried"] == 0
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
    from bench import peers
    results, exports = peers.main(["--quick", "--systems", "ls", "--label-studio-bin",
                                   _label_studio_bin() or "label-studio",
                                   "--redis-url", redis_url])
    by = {res["system"]: res for _, res in results}
    assert by["Label Studio (overlap 1)"]["labels"] > 0
    [(_, ex)] = exports
    assert ex["export"]["per_task"][1] == 500 and ex["export"]["labels"][1] == 500
