"""``finished`` in the status report (``labelq status``, the API, the dashboard; issue 35):
why no label will be asked for again — the budget spent, or every task at its cap — else
None. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker, get_project
from labelq.reporting import project_status


def _project(db_url, *, budget=None, cap=None, costs=(1.0, 2.0)):
    eng = engine_for(db_url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, "fin", "a,b", budget=budget, max_labels=cap)
        for i in range(2):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}"))
        for j, c in enumerate(costs):
            enroll_worker(s, p, f"fin-w{j}", cost=c)
    return eng


def _label(eng, task: int, worker: int, n: int) -> None:
    with session_scope(eng) as s:
        p = get_project(s, "fin")
        t = s.exec(Task.__table__.select().where(Task.project_id == p.id,
                                                 Task.seq == task)).first()
        from labelq.record.models import Worker
        w = s.exec(Worker.__table__.select().where(Worker.project_id == p.id,
                                                   Worker.seq == worker)).first()
        aid = f"a{task}-{worker}-{n}"
        s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                         expires=utcnow(), state="submitted"))
        s.flush()
        s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                    value="a"))


def _finished(eng):
    with session_scope(eng) as s:
        st = project_status(s, get_project(s, "fin"))
    return st["finished"], st["tasks"]


def test_running_then_every_task_at_its_cap(db_url):
    eng = _project(db_url, cap=1)
    assert _finished(eng)[0] is None
    _label(eng, 0, 0, 0)
    assert _finished(eng)[0] is None
    _label(eng, 1, 1, 0)
    assert _finished(eng) == ("every task at its cap",
                              {"unlabeled": 0, "in_progress": 0, "complete": 2, "gold": 0})


@pytest.mark.parametrize("budget,finished", [(3.0, "budget spent"), (1.5, "budget spent"),
                                              (2.0, None)])
def test_a_budget_that_pays_for_no_annotators_next_label_is_spent(db_url, budget, finished):
    # one label at cost 1 spent: 2.0, 0.5 or 1.0 left; the cheapest annotator costs 1
    eng = _project(db_url, budget=budget, cap=3)
    _label(eng, 0, 0, 0)
    if budget == 3.0:
        _label(eng, 1, 1, 0)  # and one at cost 2: nothing left
    got, tasks = _finished(eng)
    assert got == finished
    assert tasks["in_progress"] >= 1  # below the cap, for good when finished
