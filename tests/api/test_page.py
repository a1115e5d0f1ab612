"""The labeling page at /label, driven in headless Chromium over the DevTools Protocol:
sign in with the token, label three tasks (keys and buttons), see them counted."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from labelq.db import session_scope
from labelq.models import Label, Task, Worker

from .cdp import Browser, find_chromium
from .conftest import make_project, unavailable


@pytest.fixture
def browser(tmp_path):
    binary = find_chromium()
    if binary is None:
        unavailable("Chromium", "no chromium binary on PATH (apt-get install chromium)")
    b = Browser(binary, tmp_path / "profile")
    yield b
    b.close()


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
    b.navigate(stack.base + "/label")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('handle').textContent === 'ann-page'")
    assert b.js("document.getElementById('project').textContent") == "page"
    # And answer three tasks: key 1, key 2, then the third label's button
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
    # And the durable record has exactly those answers, in that order, from that worker
    with session_scope(stack.engine) as s:
        rows = s.exec(select(Task.external_id, Label.value)
                      .join(Label, Label.task_id == Task.id)
                      .join(Worker, Worker.id == Label.worker_id)
                      .where(Worker.handle == "ann-page").order_by(Label.id)).all()
    assert [tuple(r) for r in rows] == list(zip(seen, answers))
