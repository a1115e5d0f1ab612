"""The labeling page at /label, driven in headless Chromium over the DevTools Protocol:
sign in with the token, label three tasks (keys and buttons), see them counted."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Label, Task, Worker

from .cdp import Browser
from .conftest import make_project


def sign_in(b: Browser, stack, token: str) -> None:
    """Open the page and sign in by typing the token, as an annotator does."""
    b.navigate(stack.base + "/label")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(token)
    b.js("document.getElementById('signin-button').click()")


@pytest.mark.timeout(180)
def test_sign_in_label_three_tasks_and_see_them_counted(stack, browser):
    # Given a project whose three tasks are two texts and one image, and an annotator
    payloads = [{"text": "The service was quick & friendly <b>!</b>"},
                {"text": "Cold food, rude staff."},
                {"image_url": f"{stack.base}/static/cat.png", "caption": "a cat?"}]
    make_project(stack, "page", payloads=payloads, max_labels=1)
    token = stack.enroll("page", "ann-page")
    b = browser
    # When they open the page and sign in with their token
    sign_in(b, stack, token)
    b.wait("document.getElementById('handle').textContent === 'ann-page'")
    assert b.js("document.getElementById('project').textContent") == "page"
    # And answer three tasks: key 1, key 2, then the third label's button
    # (the calls are watched from when the first task shows: it was asked for)
    b.wait("!document.getElementById('task').hidden")
    b.js("window.calls = []; const f = window.fetch; window.fetch = (u, i) => "
         "{ window.calls.push(((i && i.method) || 'GET') + ' ' + u); return f(u, i); }; 1")
    answers, seen, ids = ["pos", "neg", "neutral"], [], []
    for n, how in enumerate(["1", "2", "button"], start=1):
        card = "document.getElementById('task').dataset.assignment"
        aid = b.wait("document.body.dataset.busy !== '1' && "
                     "!document.getElementById('task').hidden && "
                     f"!{json.dumps(ids)}.includes({card}) && {card}")
        ids.append(aid)
        task = stack.task_of(aid)
        shown = json.loads(b.js("""JSON.stringify({
            text: document.getElementById('payload-text').textContent,
            img: document.getElementById('payload-image').hidden ? null
                 : document.getElementById('payload-image').src,
            buttons: [...document.querySelectorAll('#answers button')]
                     .map(x => x.dataset.label),
            lastKey: document.getElementById('last-key').textContent})"""))
        payload = payloads[int(task[1:])]
        # (no task id on the card: it would tell gold from tasks)
        assert task not in b.js("document.getElementById('task').textContent")
        # (the payload is shown as text, never as markup; an image URL as an image)
        assert shown["text"] == payload.get("text", "")
        assert shown["img"] == payload.get("image_url")
        assert shown["buttons"] == answers and shown["lastKey"] == "3"  # keys 1–3
        seen.append(task)
        if how == "button":
            b.js("document.querySelector('#answers button[data-label=\"neutral\"]').click()")
        else:
            b.press(how)
        b.wait(f"document.getElementById('progress-labels').textContent === '{n}'")
    # Then the page counts three labels and has nothing more to offer
    b.wait("!document.getElementById('empty').hidden")
    assert b.js("document.getElementById('progress-labels').textContent") == "3"
    assert b.js("document.getElementById('progress-remaining').textContent") == "no limit"
    assert b.exceptions == []
    # (each label took the next assignment in the same request: no separate asks)
    calls = json.loads(b.js("JSON.stringify(window.calls)"))
    assert sum(c.endswith("/label?next=true") for c in calls) == 3, calls
    assert not any(c.endswith("/assignments/next") for c in calls), calls
    # And the durable record has exactly those answers, in that order, from that worker
    with session_scope(stack.engine) as s:
        rows = s.exec(select(Task.external_id, Label.value)
                      .join(Label, Label.task_id == Task.id)
                      .join(Worker, Worker.id == Label.worker_id)
                      .where(Worker.handle == "ann-page").order_by(Label.id)).all()
    assert [tuple(r) for r in rows] == list(zip(seen, answers, strict=True))


@pytest.mark.timeout(120)
def test_an_empty_page_checks_again_by_itself(stack, browser):
    # Given a one-task project whose task another annotator holds
    make_project(stack, "again", n_tasks=1, max_labels=1)
    token, other = stack.enroll("again", "ann-again"), stack.enroll("again", "ann-other")
    with stack.client(other) as c:
        held = c.post("/api/v1/assignments/next").json()["assignment"]
        assert held is not None
        # When the annotator signs in, there is nothing for them
        b = browser
        sign_in(b, stack, token)
        b.wait("!document.getElementById('empty').hidden")
        # and the other annotator gives the task back
        assert c.post(f"/api/v1/assignments/{held['assignment_id']}/decline").status_code == 200
    # Then the page shows it without being asked (it looks again every 10 s)
    aid = b.wait("!document.getElementById('task').hidden && "
                 "document.getElementById('task').dataset.assignment", timeout=30)
    assert stack.task_of(aid) == "t0"
    assert b.exceptions == []


@pytest.mark.timeout(180)
def test_instructions_and_label_names_on_the_page(stack, browser, tmp_path):
    # Given a project created from the CLI with instructions and display names of its labels
    import subprocess
    import sys

    from .conftest import ROOT
    guide = tmp_path / "guide.md"
    guide.write_text("# How to label\n\nRead the **whole** review.\n<b>Not markup</b>\n\n"
                     "- one *point*\n- two, with `code`\n\n"
                     "<img src=x onerror=alert(1)> [guide](https://example.org/g) "
                     "[bad](javascript:alert(1))\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "project", "create", "named", "--labels",
         "neg,pos,mixed", "--policy", "uniform", "--max-labels", "1", "--instructions",
         str(guide), "--label-names", 'pos="Positive",neg="Negative, clearly"', "-o", "json"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown_row = json.loads(out.stdout)
    assert shown_row["label_names"] == {"pos": "Positive", "neg": "Negative, clearly"}
    from labelq.record.projects import get_project
    with session_scope(stack.engine) as s:
        p = get_project(s, "named")
        for i in range(2):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", payload={"text": f"r{i}"}))
    token = stack.enroll("named", "ann-named")
    b = browser
    # When the annotator signs in
    sign_in(b, stack, token)
    b.wait("!document.getElementById('task').hidden")
    # Then the instructions are shown, rendered as Markdown, open, and fold away; HTML in
    # them is shown as the text it is, never as markup (issue 35)
    assert b.js("document.getElementById('instructions').hidden") is False
    assert b.js("document.getElementById('instructions').open") is True
    shown = json.loads(b.js("""JSON.stringify((() => { const r = document.getElementById(
        'instructions-text'); const q = (s) => [...r.querySelectorAll(s)];
        return {h: q('h3').map(e => e.textContent), strong: q('strong').map(e => e.textContent),
                li: q('ul > li').map(e => e.textContent), em: q('em').map(e => e.textContent),
                code: q('code').map(e => e.textContent),
                a: q('a').map(e => [e.textContent, e.getAttribute('href')]),
                other: q('b, img, script, [onerror]').length, text: r.textContent}; })())"""))
    assert shown["h"] == ["How to label"] and shown["strong"] == ["whole"]
    assert shown["li"] == ["one point", "two, with code"] and shown["em"] == ["point"]
    assert shown["code"] == ["code"] and shown["a"] == [["guide", "https://example.org/g"]]
    assert shown["other"] == 0
    assert "<b>Not markup</b>" in shown["text"] and "<img src=x onerror=alert(1)>" in shown["text"]
    assert "[bad](javascript:alert(1))" in shown["text"]
    b.js("document.querySelector('#instructions summary').click()")
    assert b.js("document.getElementById('instructions').open") is False
    # And the buttons show the display names with their keys, in the label set's order
    buttons = json.loads(b.js("JSON.stringify([...document.querySelectorAll('#answers button')]"
                              ".map(x => [x.textContent, x.dataset.label]))"))
    assert buttons == [["1 · Negative, clearly", "neg"], ["2 · Positive", "pos"],
                       ["3 · mixed", "mixed"]]
    # And key 2 answers the second button's label
    aid = b.js("document.getElementById('task').dataset.assignment")
    b.press("2")
    b.wait("document.getElementById('progress-labels').textContent === '1'")
    with session_scope(stack.engine) as s:
        assert s.exec(select(Label.value).where(Label.assignment_id == aid)).one() == "pos"
    assert b.exceptions == []
