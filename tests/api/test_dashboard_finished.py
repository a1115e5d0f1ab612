"""The dashboard as an operator saw it (issue 35), in headless Chromium at 1024 px: a
finished project reads as finished (not "in progress 273"), the Progress table fits its
card, warnings sit in their own place. A screenshot of the page is written to the test's
folder (and to ``$LABELQ_TEST_SCREENSHOTS`` when set) to be looked at."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .conftest import make_project
from .test_dashboard import cli_json, wait_applied


def _label_until_done(stack, token: str) -> int:
    n = 0
    with stack.client(token) as c:
        while True:
            got = c.post("/api/v1/assignments/next").json()
            if got.get("assignment") is None:  # nothing more (or 409 budget_exhausted)
                return n
            a = got["assignment"]
            r = c.post(f"/api/v1/assignments/{a['assignment_id']}/label", json={"label": "pos"})
            assert r.status_code == 200, r.text
            n += 1


@pytest.mark.timeout(240)
def test_a_finished_project_reads_as_finished_at_1024_px(stack, browser, tmp_path):
    # Given a project whose budget is spent with tasks below their cap, and an annotator
    # who has seen the one gold question (a gold warning)
    make_project(stack, "done", n_tasks=12, gold=1, max_labels=3, budget=6,
                 gold_schedule="onboarding:n=1")
    token = stack.enroll("done", "done-ann", cost=1)
    assert _label_until_done(stack, token) == 6
    wait_applied(stack, "done")
    expected = cli_json(stack, "status", "done")
    assert expected["finished"] == "budget spent" and expected["tasks"]["in_progress"] == 5
    assert expected["gold_warnings"], expected
    # When the operator opens the dashboard in a 1024 px wide window
    b = browser
    b.viewport(1024, 900)
    b.navigate(stack.base + "/dashboard?project=done")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(stack.operator_token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('board').dataset.project === 'done'")
    shot = b.screenshot(tmp_path / "dashboard-1024.png")
    if os.environ.get("LABELQ_TEST_SCREENSHOTS"):
        shutil.copy(shot, Path(os.environ["LABELQ_TEST_SCREENSHOTS"]) / shot.name)
    page = json.loads(b.js("""JSON.stringify({
        width: window.innerWidth,
        finished: document.getElementById('finished').hidden ? null
                  : document.getElementById('finished').textContent,
        head: document.getElementById('in-progress-head').textContent,
        bar: document.getElementById('tasks-bar').textContent,
        overflow: [...document.querySelectorAll('.card table')].map(t => {
            const card = t.closest('.card');
            return [t.id || card.querySelector('h2').textContent,
                    t.getBoundingClientRect().right - card.getBoundingClientRect().right];
        }),
        warnings: document.getElementById('warnings').hidden ? null
                  : [...document.querySelectorAll('#warning-list li')].map(li => li.textContent),
        warningsInCards: [...document.querySelectorAll('.grid .card')]
                  .filter(c => /gold questions/.test(c.textContent)).length})"""))
    # Then it says the project is finished and why, and the tasks left below the cap are
    # not called in progress
    assert page["width"] == 1024
    assert page["finished"] == ("Finished: the budget is spent — 5 tasks stay below the cap.")
    assert page["head"] == "below cap" and "in progress" not in page["bar"]
    # And every table fits inside its card
    for name, past in page["overflow"]:
        assert past <= 0.5, (name, past, str(shot))
    # And the gold warning is in the warnings box, not inside a card of numbers
    assert page["warnings"] and "has seen 1 of the 1 gold questions" in page["warnings"][0]
    assert page["warningsInCards"] == 0
    assert b.exceptions == []
