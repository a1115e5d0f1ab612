"""The operator's dashboard at /dashboard, driven in headless Chromium: its numbers are those
of `labelq status -o json`, and its pause button pauses the annotator."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Task, Worker

from .cdp import Browser
from .conftest import ROOT, Stack, make_project


def cli_json(stack: Stack, *args: str):
    out = subprocess.run([sys.executable, "-m", "cli.main", *args, "-o", "json"], cwd=ROOT,
                         env=stack.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def label_some(stack: Stack, token: str, answers: list[str]) -> None:
    with stack.client(token) as c:
        for ans in answers:
            a = c.post("/api/v1/assignments/next").json()["assignment"]
            assert a is not None
            r = c.post(f"/api/v1/assignments/{a['assignment_id']}/label", json={"label": ans})
            assert r.status_code == 200, r.text


def wait_applied(stack: Stack, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with stack.operator() as op:
        while time.monotonic() < deadline:
            if op.get(f"/api/v1/projects/{name}/status").json()["unapplied"] == 0:
                return
            time.sleep(0.2)
    raise AssertionError("labels not applied")


def wait_figures(stack: Stack, name: str, timeout: float = 60) -> None:
    """Until the dashboard's figures are computed for every label (issue 45: computed in a
    background thread, never in the request: a loaded machine can take longer than the
    request's half-second wait, and the page then shows them pending)."""
    deadline = time.monotonic() + timeout
    with stack.operator() as op:
        while time.monotonic() < deadline:
            d = op.get(f"/api/v1/projects/{name}/dashboard").json()
            if not d["throughput"]["pending"] and not d["throughput"]["behind_labels"]:
                return
            time.sleep(0.2)
    raise AssertionError("dashboard figures not computed")


def board(b: Browser) -> dict:
    return json.loads(b.js("""JSON.stringify({
        values: Object.fromEntries([...document.querySelectorAll('[data-k]')]
                  .map(e => [e.dataset.k, JSON.parse(e.dataset.v)])),
        texts: Object.fromEntries([...document.querySelectorAll('[data-k]')]
                  .map(e => [e.dataset.k, e.textContent])),
        rows: [...document.querySelectorAll('#tasks tbody tr')].map(tr => ({
                  kind: tr.dataset.kind, category: tr.dataset.category,
                  counts: Object.fromEntries([...tr.querySelectorAll('[data-state]')]
                            .map(td => [td.dataset.state, Number(td.textContent)]))})),
        workers: [...document.querySelectorAll('#workers tbody tr')].map(tr => ({
                  handle: tr.dataset.handle,
                  ...Object.fromEntries([...tr.querySelectorAll('[data-field]')]
                       .map(td => [td.dataset.field, td.textContent]))})),
        svgs: document.querySelectorAll('svg').length})"""))


@pytest.mark.timeout(240)
def test_dashboard_shows_the_numbers_of_labelq_status_and_pauses(stack, browser):
    # Given a project in two categories with a budget, gold, and two annotators at work
    pid = make_project(stack, "dash", n_tasks=8, gold=2, max_labels=2, budget=40,
                       gold_schedule="fixed:rate=0.2")
    with session_scope(stack.engine) as s:
        for t in s.exec(select(Task).where(Task.project_id == pid,
                                           Task.external_id.in_([f"t{i}" for i in range(4)]))):
            t.category = "news"
            s.add(t)
    alice = stack.enroll("dash", "dash-alice", cost=2)
    bob = stack.enroll("dash", "dash-bob", cost=1)
    label_some(stack, alice, ["pos", "neg", "pos", "pos", "neutral"])
    label_some(stack, bob, ["pos", "pos", "neg"])
    wait_applied(stack, "dash")
    wait_figures(stack, "dash")
    expected = cli_json(stack, "status", "dash")
    # When the operator opens the dashboard and signs in with the operator token
    b = browser
    b.navigate(stack.base + "/dashboard?project=dash")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(stack.operator_token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('board').dataset.project === 'dash'")
    shown = board(b)
    # Then its numbers are those of `labelq status -o json`
    for k in ("labels", "unapplied", "budget", "spent", "left"):
        assert shown["values"][k] == expected[k], k
        assert shown["texts"][k] == str(int(expected[k])), k  # integral here: shown whole
    assert shown["rows"][0] == {"kind": "tasks", "category": "all", "counts": expected["tasks"]}
    cats = {r["category"]: r["counts"] for r in shown["rows"][1:]}
    assert cats == {(c["category"] or "-"): {k: c[k] for k in expected["tasks"]}
                    for c in expected["categories"]}
    assert len(cats) == 2
    want = [{"handle": w["handle"], "status": w["status"], "cost": str(int(w["cost"])),
             "labels": str(w["labels"]), "gold_answered": str(w["gold_answered"]),
             "declined": str(w["declined"]), "expired": str(w["expired"])}
            for w in expected["workers"]]
    assert [{k: w[k] for k in want[0]} for w in shown["workers"]] == want
    # (its gold column is `labelq workers list`'s raw gold accuracy)
    listed = {w["handle"]: w for w in cli_json(stack, "workers", "list", "--project", "dash")}
    for w in shown["workers"]:
        acc = listed[w["handle"]]["gold_accuracy"]
        assert (w["gold_accuracy"] == "-") if acc is None else \
            float(w["gold_accuracy"]) == pytest.approx(acc, abs=1e-3)
    # (the charts are drawn: task bar, labels/min, budget bar, estimate curve)
    assert shown["svgs"] >= 4
    # (budget left and labels spent just now: the projection says when it runs out — or,
    # when the open tasks' missing labels cost less than what is left (8 tasks below a cap
    # of 2 at the dearest cost, 2), when they are done: only what can still be spent counts)
    assert expected["left"] > 0
    projection = b.js("document.getElementById('projection').textContent")
    if expected["spendable"] < expected["left"]:
        assert projection.startswith(f"the open tasks need at most "
                                     f"{expected['spendable']:g} of the "), projection
        assert "they are done within" in projection
    else:
        assert "runs out in" in projection
    # (three labels: at least 1/3; the page shows six decimals)
    assert 1 / 3 - 1e-6 <= shown["values"]["estimate"] <= 1
    assert b.exceptions == []
    # When the operator presses Pause on dash-bob's row
    b.js("document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
         "button[data-action=\"pause\"]').click()")
    b.wait("document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
           "[data-field=\"status\"]').textContent === 'paused'")
    # Then dash-bob is paused (the record and `labelq status` say so), the row says by
    # whom (the pause's trail, issue 41), and can be resumed
    b.wait("document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
           "[data-field=\"pause\"]').textContent === 'operator'")
    assert "paused by the operator" in b.js(
        "document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
        "[data-field=\"pause\"]').title")
    with session_scope(stack.engine) as s:
        assert s.exec(select(Worker.status).where(Worker.handle == "dash-bob")).one() == "paused"
    after = {w["handle"]: w["status"] for w in cli_json(stack, "status", "dash")["workers"]}
    assert after == {"dash-alice": "active", "dash-bob": "paused"}
    b.js("document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
         "button[data-action=\"resume\"]').click()")
    b.wait("document.querySelector('#workers tr[data-handle=\"dash-bob\"] "
           "[data-field=\"status\"]').textContent === 'active'")
    # And the export button runs an export job to the end
    b.js("document.querySelector('[data-export]').click()")
    b.wait("!!document.getElementById('export-state').dataset.done", timeout=60)
    assert b.exceptions == []


def test_dashboard_data_needs_the_operator_token(stack):
    make_project(stack, "dash-auth", n_tasks=2)
    with stack.client() as c:
        assert c.get("/dashboard").status_code == 200  # the page itself asks for the token
        assert c.get("/api/v1/projects/dash-auth/dashboard").status_code == 401
        assert c.get("/api/v1/projects").status_code == 401
    with stack.client("wrong-token-wrong-token") as c:
        assert c.get("/api/v1/projects/dash-auth/dashboard").status_code == 403
    with stack.operator() as op:
        d = op.get("/api/v1/projects/dash-auth/dashboard").json()
        st = op.get("/api/v1/projects/dash-auth/status").json()
    assert d["status"] == st and d["quality"]["estimate"] is None  # nothing labelled yet
    assert "dash-auth" in [p["name"] for p in op_projects(stack)]


def op_projects(stack: Stack) -> list[dict]:
    with stack.operator() as op:
        return op.get("/api/v1/projects").json()
