"""Independence (issue 42): the labeling page does not show the model's answer unless the
project shows suggestions (``labelq project update NAME --show-suggestions``); then it
shows it, the API's assignment carries it, and the label given is marked ``suggested``
(the worker model weighs it apart: tests/policies/test_model_source.py)."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Label, Task
from labelq.record.predictions import load_predictions
from labelq.record.projects import get_project, update_project

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
    # Then the API's assignment carries the model's answer for the task it names
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
    assert a["suggestion"] == MODEL.get(stack.task_of(a["assignment_id"]))
    b: Browser = browser
    # When the annotator labels the four tasks on the page
    sign_in(b, stack, token)
    seen = _label_all(stack, b, 4)
    # Then each task the model predicted showed its answer, the other none
    assert {t: s for t, s in seen} == {f"t{i}": MODEL.get(f"t{i}") for i in range(4)}
    # and every label given on the page is marked as given with suggestions on
    assert _marks(stack, "sug-on") == {f"t{i}": True for i in range(4)}
    assert b.exceptions == []
