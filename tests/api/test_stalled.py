"""A stalled project as the operator and the annotators see it (issue 41), on the real
stack (API server, Celery worker, PostgreSQL, Redis) and in headless Chromium: 3
annotators, max-labels 3, one paused after labelling, the other two having labelled
everything they can. ``labelq status`` (plain and JSON) and the dashboard name the
stalled state with its count and the ways out, with no budget projection; an annotator's
next answer says ``stalled``, not "try again later", and the labeling page shows it and
stops polling."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from .conftest import ROOT, make_project
from .test_dashboard import cli_json, wait_applied
from .test_page import sign_in


def _label(stack, token: str, limit: int | None = None) -> int:
    n = 0
    with stack.client(token) as c:
        while limit is None or n < limit:
            got = c.post("/api/v1/assignments/next").json()
            if got["assignment"] is None:
                return n
            aid = got["assignment"]["assignment_id"]
            r = c.post(f"/api/v1/assignments/{aid}/label", json={"label": "pos"})
            assert r.status_code == 200, r.text
            n += 1
    return n


@pytest.mark.timeout(300)
def test_a_stalled_project_is_announced_and_the_page_stops_asking(stack, browser):
    # Given 3 annotators and max-labels 3 on 8 tasks, with a budget
    make_project(stack, "stall", n_tasks=8, max_labels=3, budget=1000)
    tokens = [stack.enroll("stall", f"stall-{i}", cost=1) for i in range(3)]
    # When the third labels 3 tasks and is paused, and the others label all they can
    assert _label(stack, tokens[2], limit=3) == 3
    with stack.operator() as op:
        r = op.post("/api/v1/workers/stall-2/status", json={"status": "paused"})
        assert r.status_code == 200, r.text
    assert _label(stack, tokens[0]) == 8
    assert _label(stack, tokens[1]) == 8
    wait_applied(stack, "stall")
    # Then labelq status -o json says stalled: 5 tasks, why and the ways out
    st = cli_json(stack, "status", "stall")
    assert st["state"] == "stalled" and st["finished"] is None
    assert st["stalled"]["tasks"] == 5 and st["stalled"]["all"] is True
    assert st["tasks"]["in_progress"] == 5 and st["spendable"] == 0
    assert any("resume a paused one: labelq workers resume stall-2" == w
               for w in st["stalled"]["ways_out"])
    # And plain labelq status names the state and lists the ways out
    out = subprocess.run([sys.executable, "-m", "cli.main", "status", "stall"], cwd=ROOT,
                         env=stack.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "stalled: 5 tasks need a label no active annotator can give" in out.stdout
    assert "1 annotator paused: stall-2" in out.stdout
    for way in ("enrol an annotator: labelq workers enroll stall HANDLE",
                "resume a paused one: labelq workers resume stall-2",
                "lower --max-labels: labelq project update stall --max-labels N",
                "finish as is: labelq export stall"):
        assert way in out.stdout, out.stdout
    # And labelq check has a WARN row for it
    chk = subprocess.run([sys.executable, "-m", "cli.main", "check", "--timeout", "0.5",
                          "-o", "json"], cwd=ROOT, env=stack.env, capture_output=True,
                         text=True, timeout=120)
    rows = {r["check"]: r for r in json.loads(chk.stdout)}
    assert rows["project stall"]["warning"] is True and rows["project stall"]["ok"] is True
    assert rows["project stall"]["detail"].startswith(
        "stalled: 5 tasks need a label no active annotator can give; ways out: ")
    # And the dashboard's body: the same status, no "budget runs out in 4 min"
    with stack.operator() as op:
        d = op.get("/api/v1/projects/stall/dashboard").json()
    assert d["status"]["stalled"] == st["stalled"]
    assert d["throughput"]["runs_out_in_s"] is None and d["throughput"]["budget_outlasts"]
    # And an annotator asking for work is told the project is stalled
    with stack.client(tokens[0]) as c:
        got = c.post("/api/v1/assignments/next").json()
    assert got["assignment"] is None
    assert got["message"].startswith("stalled: no task is left that you can label")
    assert "try again later" not in got["message"]

    # When the operator opens the dashboard
    b = browser
    b.viewport(1024, 900)
    b.navigate(stack.base + "/dashboard?project=stall")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(stack.operator_token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('board').dataset.project === 'stall'")
    page = json.loads(b.js("""JSON.stringify({
        stalled: document.getElementById('stalled').hidden ? null
                 : document.getElementById('stalled-text').textContent,
        why: document.getElementById('stalled-why').textContent,
        ways: [...document.querySelectorAll('#stalled-ways li')].map(li => li.textContent),
        finished: !document.getElementById('finished').hidden,
        projection: document.getElementById('projection').textContent})"""))
    # Then it shows the stalled state, the count, why and the ways out, and no projection
    assert page["stalled"] == "Stalled: 5 tasks need a label no active annotator can give."
    assert "1 annotator paused: stall-2" in page["why"]
    assert page["ways"] == st["stalled"]["ways_out"] and not page["finished"]
    assert page["projection"] == ("the project is stalled: nothing can be spent until an "
                                  "annotator can label")
    assert b.exceptions == []

    # When an annotator opens the labeling page
    sign_in(b, stack, tokens[1])
    b.wait("!document.getElementById('empty').hidden")
    # Then it says stalled, and asks no more by itself
    assert b.js("document.getElementById('empty-text').textContent").startswith(
        "stalled: no task is left that you can label")
    assert b.js("document.getElementById('empty').dataset.state") == "stalled"
    assert b.js("retry") is None  # no next ask scheduled
    b.js("window.calls = []; const f = window.fetch; window.fetch = (u, i) => "
         "{ window.calls.push(u); return f(u, i); }; 1")
    time.sleep(b.js("RETRY_MS") / 1000 + 1.5)
    assert b.js("window.calls.length") == 0  # a page that polled would have asked again
    assert b.exceptions == []
