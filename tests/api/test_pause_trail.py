"""Issue 41: every pause leaves a trail — when, by which rule, on what evidence — shown to
the annotator (the forbidden answer to ``next``, ``/me/progress``, the labeling page) and to
the operator (``labelq workers list/show -o json``, the dashboard's data). The real server,
Celery worker, PostgreSQL and Redis; the page in headless Chromium."""

from __future__ import annotations

import re
import time

import pytest

from labelq.record.db import session_scope
from labelq.record.models import Task
from labelq.record.projects import create_project

from .conftest import Stack
from .test_dashboard import cli_json
from .test_page import sign_in

QUALITY = {"threshold": 0.6, "min_gold": 8, "confidence": 0.99, "rule": "sequential"}
TRAIL = re.compile(r"paused by the quality rule after (\d+) of (\d+) gold answers right; "
                   r"ask your operator")


def _project(stack: Stack, name: str) -> None:
    """Six tasks and twenty gold questions (answer "pos"), every assignment gold first."""
    with session_scope(stack.engine) as s:
        p = create_project(s, name, "pos,neg", policy="uniform", max_labels=2,
                           gold_schedule="fixed:rate=1", quality=dict(QUALITY))
        for i in range(6):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", payload={"text": "t"}))
        for i in range(20):
            s.add(Task(project_id=p.id, seq=6 + i, external_id=f"g{i}", is_gold=True,
                       gold_answer="pos", payload={"text": "g"}))


@pytest.mark.timeout(240)
def test_a_quality_pause_and_an_operator_pause_leave_their_trails(stack, browser):
    # Given a project with the demo's quality rule and an annotator who answers every gold
    # question wrong, and another annotator
    _project(stack, "trail")
    token = stack.enroll("trail", "ann-wrong")
    other = stack.enroll("trail", "trail-other")
    # When they label until the rule pauses them (the Celery worker applies and judges)
    refused = None
    with stack.client(token) as c:
        for _ in range(200):
            r = c.post("/api/v1/assignments/next")
            if r.status_code == 403:
                refused = r.json()
                break
            a = r.json()["assignment"]
            if a is None:
                time.sleep(0.1)
                continue
            assert c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                          json={"label": "neg"}).status_code == 200
        progress = c.get("/api/v1/me/progress").json()
    # Then the forbidden answer to next says why, in words, with the evidence
    assert refused is not None, "never paused"
    assert refused["code"] == "forbidden"
    m = TRAIL.search(refused["message"])
    assert m and m.group(1) == "0" and int(m.group(2)) >= QUALITY["min_gold"], refused
    pause = refused["pause"]
    assert pause["rule"] == "quality" and pause["gold_right"] == 0
    assert pause["gold_answered"] == int(m.group(2))
    assert pause["statistic"] == "likelihood_ratio" and pause["bound"] == 100
    assert pause["value"] >= 100
    # and so does /me/progress
    assert progress["status"] == "paused" and progress["pause"] == pause
    # and the operator sees the same trail in `workers show` and `workers list`
    shown = cli_json(stack, "workers", "show", "ann-wrong")
    assert shown["status"] == "paused" and shown["pause"] == pause
    assert [p["rule"] for p in shown["pauses"]] == ["quality"]
    listed = {w["handle"]: w for w in cli_json(stack, "workers", "list", "--project", "trail")}
    assert listed["ann-wrong"]["pause"] == pause and listed["trail-other"]["pause"] is None
    # When the operator pauses the other annotator
    with stack.operator() as op:
        r = op.post("/api/v1/workers/trail-other/status", json={"status": "paused"})
        assert r.status_code == 200, r.text
        board = op.get("/api/v1/projects/trail/dashboard").json()
    # Then that pause's trail says so (rule "operator", no evidence), the dashboard has both
    with stack.client(other) as c:
        p = c.get("/api/v1/me/progress").json()["pause"]
    assert p["rule"] == "operator" and p["gold_answered"] is None
    assert p["text"] == "paused by the operator; ask your operator"
    assert board["pauses"]["ann-wrong"] == pause
    assert board["pauses"]["trail-other"]["rule"] == "operator"
    # And the annotator's page shows the quality rule's words when they sign in
    sign_in(browser, stack, token)
    browser.wait("document.getElementById('empty-text').textContent"
                 ".includes('paused by the quality rule after 0 of')")
    assert "ask your operator" in browser.js("document.getElementById('empty-text').textContent")
