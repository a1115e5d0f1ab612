"""The review page at /review, driven in headless Chromium over the DevTools Protocol: a
reviewer signs in with its token, sees the suggested tasks one at a time with their
content and without the annotators' answers (until asked for), answers five with the keys,
and they become gold of kind suggested."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import session_scope
from labelq.record.models import Project, Task

from .cdp import Browser
from .conftest import make_project


def label_all(stack, token: str, answer) -> int:
    """The annotator labels every task the API gives it (``answer(n)`` for the n-th)."""
    n = 0
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
        while a is not None:
            out = c.post(f"/api/v1/assignments/{a['assignment_id']}/label?next=true",
                         json={"label": answer(n)})
            assert out.status_code == 200, out.text
            a, n = out.json()["next"]["assignment"], n + 1
    return n


@pytest.mark.timeout(240)
def test_answer_five_suggested_tasks_with_the_keys(stack, browser: Browser):
    # Given a project whose 8 tasks two annotators labelled (disagreeing on most), the
    # tasks labelq gold suggest listed, and a reviewer of the project
    payloads = [{"text": f"Is review {i} positive? <b>bold?</b>", "stars": i % 5}
                for i in range(8)]
    make_project(stack, "rev", payloads=payloads, max_labels=2)
    t1, t2 = stack.enroll("rev", "rev-a"), stack.enroll("rev", "rev-b")
    assert label_all(stack, t1, lambda n: "pos") == 8
    assert label_all(stack, t2, lambda n: "neg" if n % 4 else "pos") == 8
    env = {"LABELQ_DATABASE_URL": stack.database_url, "LABELQ_REDIS_URL": stack.redis_url}

    def run(*args: str) -> str:
        res = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    suggested = [r["id"] for r in json.loads(run("gold", "suggest", "rev", "--n", "6",
                                                 "-o", "json"))]
    assert len(suggested) >= 5
    token = json.loads(run("reviewers", "add", "rev-expert", "--project", "rev",
                           "-o", "json"))["token"]
    b = browser
    # When the reviewer opens /review and signs in with the token
    b.navigate(stack.base + "/review")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('reviewer').textContent === 'rev-expert'")
    card = "document.getElementById('task').dataset.task"
    first = b.wait(f"!document.getElementById('task').hidden && {card}")
    # Then the first suggested task shows with its content (as text, never markup), its
    # kind, and no annotator's answer until asked for
    assert first == suggested[0]
    shown = json.loads(b.js("""JSON.stringify({
        text: document.getElementById('payload-text').textContent,
        fields: document.getElementById('payload-fields').textContent,
        kind: document.getElementById('task-kind').textContent,
        answersHidden: document.getElementById('answers').hidden,
        buttons: [...document.querySelectorAll('#buttons button')].map(x => x.dataset.label),
        left: document.getElementById('left-suggested').textContent})"""))
    i = int(first[1:])
    assert shown["text"] == payloads[i]["text"] and "stars" in shown["fields"]
    assert shown["kind"] == "suggested" and shown["answersHidden"] is True
    assert shown["buttons"] == ["pos", "neg", "neutral"]
    assert shown["left"] == str(len(suggested))
    assert "rev-a" not in b.js("document.getElementById('task').textContent")
    # and the button reveals them
    b.js("document.getElementById('reveal').click()")
    b.wait("!document.getElementById('answers').hidden")
    revealed = b.js("document.getElementById('answers-list').textContent")
    assert "rev-a: pos" in revealed and "rev-b" in revealed
    # When they answer five tasks with the keys (1 = pos, 2 = neg)
    answered: dict[str, str] = {}
    for n in range(5):
        tid = b.wait(f"document.body.dataset.busy !== '1' && "
                     f"!document.getElementById('task').hidden && "
                     f"!{json.dumps(list(answered))}.includes({card}) && {card}")
        # (each new task starts with the answers hidden again)
        assert b.js("document.getElementById('answers').hidden") is (n > 0)
        key = "1" if n % 2 == 0 else "2"
        answered[tid] = "pos" if key == "1" else "neg"
        b.press(key)
        b.wait(f"document.getElementById('message').textContent.startsWith({json.dumps(tid)})")
    b.wait("document.body.dataset.busy !== '1'")
    assert "error" not in b.js("document.getElementById('message').className")
    # Then they are the five suggested tasks in the order listed, gold with those answers,
    # of kind suggested; the others are not gold
    assert list(answered) == suggested[:5]
    with session_scope(stack.engine) as s:
        pid = s.exec(select(Project.id).where(Project.name == "rev")).one()
        gold = {t.external_id: (t.gold_answer, t.gold_kind) for t in s.exec(
            select(Task).where(Task.project_id == pid, Task.is_gold))}
    assert gold == {t: (a, "suggested") for t, a in answered.items()}
    assert b.js("document.getElementById('left-suggested').textContent") == \
        str(len(suggested) - 5)
    assert b.exceptions == []
