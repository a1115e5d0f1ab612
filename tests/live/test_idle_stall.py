"""The idle reason of a finished or stalled project (issue 41): an annotator who asks for
work is told ``finished: ...`` or ``stalled: ...`` (the labeling page stops asking on
either), not "try again later", by the real engine on a real Redis and SQLite."""

from __future__ import annotations

import pytest

from labelq.errors import BudgetExhausted
from labelq.live.assign import BUDGET_SPENT, NOTHING_NOW
from labelq.record.db import session_scope
from labelq.record.projects import set_worker_status
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def _label_all(s: Service, handle: str, limit: int | None = None) -> int:
    n = 0
    while (limit is None or n < limit) and (a := s.next_assignment(handle)) is not None:
        s.submit(handle, a.assignment_id, "a")
        n += 1
    return n


def test_one_paused_the_rest_having_labelled_all_they_can_is_stalled(r, sqlite_url):
    # Given 3 annotators and max-labels 3 on 6 tasks
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=3, max_labels=3)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    # When one labels two tasks and is paused, the others label everything they can
    assert _label_all(s, "p-w2", limit=2) == 2
    with session_scope(eng) as db:
        set_worker_status(db, "p-w2", "paused")
    assert _label_all(s, "p-w0") == 6
    # (one who still has work is not told it is stalled)
    assert s.project_state(pid).state == "running"
    assert _label_all(s, "p-w1") == 6
    # Then an annotator asking again is told the project is stalled, not to try later
    assert s.next_assignment("p-w0") is None
    reason = s.idle_reason("p-w0")
    assert reason.startswith("stalled: no task is left that you can label"), reason
    assert "try again later" not in reason
    assert s.project_state(pid).state == "stalled"
    # And once the paused one is resumed, the project runs again (and they get work)
    with session_scope(eng) as db:
        set_worker_status(db, "p-w2", "active")
    assert s.project_state(pid).state == "running"
    assert s.idle_reason("p-w0") == NOTHING_NOW
    assert _label_all(s, "p-w2") == 4


def test_every_task_at_its_cap_is_finished(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=2, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    assert _label_all(s, "p-w0") == 3
    assert s.next_assignment("p-w1") is None
    assert s.idle_reason("p-w1") == ("finished: the project needs no more labels (every "
                                     "task at its cap); thank you")


def test_a_budget_that_pays_only_the_cheaper_annotator_is_not_finished(r, sqlite_url):
    # Given a budget of 3, an annotator at cost 2 and one at cost 1
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=2, budget=3.0)
    with session_scope(eng) as db:
        from labelq.record.models import Worker
        w0 = db.exec(Worker.__table__.select().where(Worker.handle == "p-w0")).first()
        db.exec(Worker.__table__.update().where(Worker.id == w0.id).values(cost=2.0))
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    # When the dearer one spends 2: 1 is left, which pays only the cheaper one
    a = s.next_assignment("p-w0")
    s.submit("p-w0", a.assignment_id, "a")
    with pytest.raises(BudgetExhausted):
        s.next_assignment("p-w0")
    # Then the dearer one is told the budget is spent for them, not that it is finished
    assert s.idle_reason("p-w0") == BUDGET_SPENT
    assert s.project_state(pid).state == "running"
    # and once the cheaper one spends the last 1, it is finished for both
    b = s.next_assignment("p-w1")
    s.submit("p-w1", b.assignment_id, "a")
    for h in ("p-w0", "p-w1"):
        assert s.idle_reason(h) == ("finished: the project needs no more labels (budget "
                                    "spent); thank you")
