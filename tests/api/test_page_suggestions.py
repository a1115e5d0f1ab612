"""Independence (issue 42): the labeling page does not show the model's answer unless the
project shows suggestions (``labelq project update NAME --show-suggestions``); then it
shows it, the API's assignment carries it, and the label given is marked ``suggested``
(the worker model weighs it apart: tests/policies/test_model_source.py)."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Label, Task, Worker
from labelq.record.predictions import load_predictions
from labelq.record.projects import get_project, update_project
from labelq.record.withheld import withheld

from .cdp import Browser
from .conftest import make_project
from .test_page import sign_in

# the model's answer: neg on t0, neutral on t1, pos on t2 (t3 has no prediction)
PREDS = "id,p_pos,p_neg,p_neutral\nt0,0.1,0.8,0.1\nt1,0.2,0.2,0.6\nt2,0.7,0.2,0.1\n"
MODEL = {"t0": "neg", "t1": "neutral", "t2": "pos"}


def _project(stack, name: str, tmp_path, *, show: bool) -> None:
    make_project(stack, name, n_tasks=4, max_labels=1)
    (tmp_path / f"{name}.csv").write_text(PREDS)
    with session_scope(stack.engine) as s:
        load_predictions(s, get_project(s, name), tmp_path / f"{name}.csv", model="clf")
        if show:
            update_project(s, name, show_suggestions=True)


def _label_all(stack, b: Browser, n: int) -> list[tuple[str, str | None]]:
    """Answer ``n`` tasks with key 1; (task, the suggestion shown or None) each."""
    seen: list[tuple[str, str | None]] = []
    ids: list[str] = []
    for k in range(1, n + 1):
        card = "document.getElementById('task').dataset.assignment"
        aid = b.wait("document.body.dataset.busy !== '1' && "
                     "!document.getElementById('task').hidden && "
                     f"!{json.dumps(ids)}.includes({card}) && {card}")
        ids.append(aid)
        shown = b.js("document.getElementById('suggestion').hidden ? null : "
                     "document.getElementById('suggestion-label').textContent")
        seen.append((stack.task_of(aid), shown))
        b.press("1")
        b.wait(f"document.getElementById('progress-labels').textContent === '{k}'")
    return seen


def _shown(stack, name: str, handle: str, model: dict[str, str]) -> dict[str, str | None]:
    """What the page should show ``handle`` per task: the model's answer, but none on the
    assignments withheld (a quarter, labelq.record.withheld) or without a prediction."""
    with session_scope(stack.engine) as s:
        p = get_project(s, name)
        w = s.exec(select(Worker).where(Worker.project_id == p.id,
                                        Worker.handle == handle)).one()
        tasks = s.exec(select(Task).where(Task.project_id == p.id)).all()
        return {t.external_id: None if withheld(w.id, t.id) else model.get(t.external_id)
                for t in tasks}


def _withheld(stack, name: str, handle: str) -> set[str]:
    """The tasks whose assignment to ``handle`` shows no suggestion whatever the model
    (labelq.record.withheld, from the SQL ids: they differ with the tests run before)."""
    with session_scope(stack.engine) as s:
        p = get_project(s, name)
        w = s.exec(select(Worker).where(Worker.project_id == p.id,
                                        Worker.handle == handle)).one()
        tasks = s.exec(select(Task).where(Task.project_id == p.id)).all()
        return {t.external_id for t in tasks if withheld(w.id, t.id)}


def _marks(stack, name: str) -> dict[str, bool | None]:
    with session_scope(stack.engine) as s:
        p = get_project(s, name)
        rows = s.exec(select(Task.external_id, Label.suggested)
                      .join(Label, Label.task_id == Task.id)
                      .where(Label.project_id == p.id)).all()
    return {t: g for t, g in rows}


@pytest.mark.timeout(180)
def test_the_page_shows_no_suggestion_by_default(stack, browser, tmp_path):
    # Given a project with a model's predictions and suggestions off (the default)
    _project(stack, "sug-off", tmp_path, show=False)
    token = stack.enroll("sug-off", "ann-sug-off")
    b: Browser = browser
    # When an annotator labels its four tasks on the page
    sign_in(b, stack, token)
    seen = _label_all(stack, b, 4)
    # Then no task showed the model's answer, and no label is marked suggested
    assert [s for _, s in seen] == [None] * 4
    assert set(_marks(stack, "sug-off").values()) <= {False, None}
    assert b.exceptions == []


@pytest.mark.timeout(180)
def test_the_page_shows_the_models_answer_when_on_and_marks_the_label(stack, browser,
                                                                      tmp_path):
    # Given the same project with suggestions turned on
    _project(stack, "sug-on", tmp_path, show=True)
    token = stack.enroll("sug-on", "ann-sug-on")
    shown = _shown(stack, "sug-on", "ann-sug-on", MODEL)
    # Then the API's assignment carries the model's answer for the task it names
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
    assert a["suggestion"] == shown[stack.task_of(a["assignment_id"])]
    b: Browser = browser
    # When the annotator opens the page, and reloads it on the first task
    sign_in(b, stack, token)
    first = b.wait("!document.getElementById('task').hidden && "
                   "document.getElementById('task').dataset.assignment")
    b.navigate(stack.base + "/label")  # (the token stays in the tab's sessionStorage)
    b.wait("document.readyState === 'complete' && !document.getElementById('task').hidden "
           f"&& document.getElementById('task').dataset.assignment === {json.dumps(first)}")
    # Then the reloaded page shows the same task with the same suggestion
    again = b.js("document.getElementById('suggestion').hidden ? null : "
                 "document.getElementById('suggestion-label').textContent")
    assert again == shown[stack.task_of(first)]
    # When the annotator labels the four tasks on the page
    seen = _label_all(stack, b, 4)
    # Then each task the model predicted showed its answer (but for a withheld one), the
    # other none
    assert {t: s for t, s in seen} == shown
    # and every label given on the page is marked as given with a suggestion shown, but
    # for the assignments withheld
    # (a task the model did not predict shows nothing either way; its label's mark says
    # whether the assignment was one withheld)
    withheld_tasks = _withheld(stack, "sug-on", "ann-sug-on")
    assert _marks(stack, "sug-on") == {f"t{i}": f"t{i}" not in withheld_tasks
                                       for i in range(4)}
    assert b.exceptions == []


def test_current_repeats_the_suggestion_next_showed(stack, tmp_path):
    """A page reload reads ``GET /assignments/current``: each held assignment as ``next``
    gave it, ``suggestion`` included (present, maybe null) exactly where the project shows
    suggestions."""
    # Given a project showing suggestions (12 tasks, a prediction for all but t11) and one
    # with them off, each with an annotator
    model = {f"t{i}": ("pos", "neg", "neutral")[i % 3] for i in range(11)}
    rows = "".join(f"{t},{0.8 if c == 'pos' else 0.1},{0.8 if c == 'neg' else 0.1},"
                   f"{0.8 if c == 'neutral' else 0.1}\n" for t, c in model.items())
    for name, show in (("cur-on", True), ("cur-off", False)):
        make_project(stack, name, n_tasks=12, max_labels=1)
        (tmp_path / f"{name}.csv").write_text("id,p_pos,p_neg,p_neutral\n" + rows)
        with session_scope(stack.engine) as s:
            load_predictions(s, get_project(s, name), tmp_path / f"{name}.csv", model="clf")
            update_project(s, name, show_suggestions=show)
    for name, show in (("cur-on", True), ("cur-off", False)):
        token = stack.enroll(name, f"ann-{name}")
        shown = _shown(stack, name, f"ann-{name}", model)
        seen: dict[str, str | None] = {}
        with stack.client(token) as c:
            assert c.get("/api/v1/assignments/current").json() == {"assignments": []}
            for _ in range(12):
                # When the annotator takes a task, and reads what it holds (a reload)
                a = c.post("/api/v1/assignments/next").json()["assignment"]
                held = c.get("/api/v1/assignments/current").json()["assignments"]
                # Then it holds that one, exactly as next gave it: with the suggestion
                # key on the project that shows them, and without it on the other
                assert held == [a]
                assert ("suggestion" in a) is show
                if show:
                    seen[stack.task_of(a["assignment_id"])] = a["suggestion"]
                r = c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                           json={"label": "pos"})
                assert r.status_code == 200, r.text
        if show:
            # and the suggestion is the model's answer, none without a prediction (t11) or
            # on a withheld assignment
            assert seen == shown
            assert shown["t11"] is None
