"""``labelq annotate`` (token from --token or LABELQ_TOKEN) against the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pipeline.conftest import ROOT

from .conftest import make_project


def labelq(stack, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(PYTHONPATH=str(ROOT), LABELQ_API_URL=stack.base)
    if token:
        env["LABELQ_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "cli.main", "annotate", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)


def test_annotate_from_a_shell_with_the_token_in_the_environment(stack):
    # Given an annotator whose token is in LABELQ_TOKEN
    make_project(stack, "shell", n_tasks=2)
    token = stack.enroll("shell", "ann-shell")
    # When they take a task and answer it from the shell
    nxt = labelq(stack, "next", "-o", "json", token=token)
    assert nxt.returncode == 0, nxt.stderr
    a = json.loads(nxt.stdout)[0]
    sub = labelq(stack, "submit", a["assignment_id"], "neg", "-o", "json", token=token)
    assert sub.returncode == 0, sub.stderr
    assert json.loads(sub.stdout) == [{"assignment_id": a["assignment_id"], "label": "neg",
                                       "duplicate": False}]
    # Then the label counts, and a label outside the set exits 3 with the server's message
    prog = labelq(stack, "progress", "-o", "json", token=token)
    assert json.loads(prog.stdout)[0]["labels"] == 1
    bad = labelq(stack, "submit", a["assignment_id"], "maybe", "--token", token)
    assert bad.returncode == 3 and "label set" in bad.stderr
    # And --next answers the second task with the same request, then says none is left
    b = json.loads(labelq(stack, "next", "-o", "json", token=token).stdout)[0]
    chained = labelq(stack, "submit", b["assignment_id"], "pos", "--next", "-o", "json",
                     token=token)
    assert chained.returncode == 0, chained.stderr
    assert json.loads(chained.stdout)[0]["assignment_id"] == b["assignment_id"]
    assert "no task" in chained.stderr and b["task"] != a["task"]
    # And a wrong token (given as an option) exits 6 (forbidden) with the reason
    wrong = labelq(stack, "next", "--token", "nope")
    assert wrong.returncode == 6 and "unknown token" in wrong.stderr
