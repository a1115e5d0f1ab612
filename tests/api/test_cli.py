"""``labelq annotate`` (token from --token or LABELQ_TOKEN) against the real server, and
``labelq serve --workers``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from pipeline.conftest import ROOT

from .conftest import Server, make_project


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
    a = json.loads(nxt.stdout)["assignment"]
    sub = labelq(stack, "submit", a["assignment_id"], "neg", "-o", "json", token=token)
    assert sub.returncode == 0, sub.stderr
    assert json.loads(sub.stdout) == {"assignment_id": a["assignment_id"], "label": "neg",
                                      "duplicate": False, "next": None}
    # Then the label counts, and a label outside the set exits 3 with the server's message
    prog = labelq(stack, "progress", "-o", "json", token=token)
    assert json.loads(prog.stdout)["labels"] == 1
    bad = labelq(stack, "submit", a["assignment_id"], "maybe", "--token", token)
    assert bad.returncode == 3 and "label set" in bad.stderr
    # And --next answers the second task with the same request, then says none is left
    b = json.loads(labelq(stack, "next", "-o", "json", token=token).stdout)["assignment"]
    chained = labelq(stack, "submit", b["assignment_id"], "pos", "--next", "-o", "json",
                     token=token)
    assert chained.returncode == 0, chained.stderr
    got = json.loads(chained.stdout)
    assert got == {"assignment_id": b["assignment_id"], "label": "pos", "duplicate": False,
                   "next": {"assignment": None, "message": got["next"]["message"]}}
    assert "no task" in got["next"]["message"]
    assert "no task" in chained.stderr and stack.task_of(b["assignment_id"]) != stack.task_of(a["assignment_id"])
    # and `next` with nothing left is no error: the API's body (a null assignment and its
    # message), and why on stderr
    none = labelq(stack, "next", "-o", "json", token=token)
    assert none.returncode == 0 and json.loads(none.stdout)["assignment"] is None
    # (the one annotator has seen both tasks, each below its cap of 2: stalled)
    assert json.loads(none.stdout)["message"].startswith("stalled: no task is left")
    assert none.stderr.startswith("stalled: no task is left")
    # And a wrong token (given as an option) exits 6 (forbidden) with the reason
    wrong = labelq(stack, "next", "--token", "nope")
    assert wrong.returncode == 6 and "unknown token" in wrong.stderr


def _children(pid: int) -> list[str]:
    """Command lines of the direct children of ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                with open(f"/proc/{entry}/cmdline") as f:
                    out.append(f.read().replace("\0", " "))
        except (OSError, IndexError, ValueError):
            continue
    return out


def test_serve_with_two_worker_processes_answers_from_both(stack, tmp_path):
    # Given `labelq serve --workers 2` on the stack's database and Redis
    make_project(stack, "twoproc", n_tasks=4)
    token = stack.enroll("twoproc", "ann-twoproc")
    srv = Server(stack.env, ROOT, tmp_path / "serve2.log", args=("--workers", "2")).start()
    try:
        # Then two server processes run under it
        workers = [c for c in _children(srv.proc.pid) if "spawn_main" in c]
        assert len(workers) == 2, _children(srv.proc.pid)
        # and an annotator is served (new connections, so both may answer)
        import httpx
        for _ in range(10):
            r = httpx.get(srv.base + "/api/v1/me", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200 and r.json()["handle"] == "ann-twoproc"
        nxt = httpx.post(srv.base + "/api/v1/assignments/next",
                         headers={"Authorization": f"Bearer {token}"})
        assert nxt.status_code == 200 and nxt.json()["assignment"] is not None
    finally:
        srv.stop()
    # and stopping it stops them
    assert srv.proc.poll() is not None


def test_check_finds_the_running_worker_and_says_when_there_is_none(stack):
    def check(timeout: str, **extra) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli.main", "check", "-o", "json",
                               "--timeout", timeout],
                              cwd=ROOT, env={**stack.env, **extra}, capture_output=True,
                              text=True, timeout=60)
    # Given the test stack (PostgreSQL, Redis, a Celery worker on the queue)
    ok = check("5")  # (inspect waits this long for replies; a loaded machine has margin)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rows = {r["check"]: r for r in json.loads(ok.stdout)}
    assert all(r["ok"] for r in rows.values()) and rows["celery worker"]["detail"]
    # When the queue is one no worker consumes
    alone = check("1", LABELQ_CELERY_QUEUE=f"nobody-{uuid.uuid4().hex[:8]}")
    # Then the check fails with exit code 9 and says what is missing
    assert alone.returncode == 9
    rows = {r["check"]: r for r in json.loads(alone.stdout)}
    assert rows["database"]["ok"] and rows["redis"]["ok"] and not rows["celery worker"]["ok"]
    assert "start `labelq run-worker`" in rows["celery worker"]["detail"]
