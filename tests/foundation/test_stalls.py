"""Stalls in the status report (issue 41): open tasks no active annotator can serve —
each active one has seen them, their capacity is spent, everyone is paused, their
categories do not cover them — named as a state with the ways out; a project that runs
is not called stalled. SQLite and PostgreSQL."""

from __future__ import annotations

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Task, Worker, utcnow
from labelq.record.projects import (
    create_project,
    enroll_worker,
    get_project,
    set_worker_status,
    update_project,
)
from labelq.record.stalls import stall_text
from labelq.reporting import gold_unscheduled, project_status, status_report


def _project(db_url, *, n_tasks=5, cap=3, workers=3, categories=None, capacity=None,
             budget=None, gold_schedule=None):
    eng = engine_for(db_url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, "st", "a,b", max_labels=cap, budget=budget,
                           gold_schedule=gold_schedule)
        for i in range(n_tasks):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}",
                       category=(categories or {}).get(i, "")))
        for j in range(workers):
            enroll_worker(s, p, f"st-w{j}", capacity=capacity)
    return eng


def _label(eng, task: int, worker: int, state: str = "submitted") -> None:
    """Worker ``worker`` labels task ``task`` (or declines it, or lets it expire)."""
    with session_scope(eng) as s:
        p = get_project(s, "st")
        t = s.exec(Task.__table__.select().where(Task.project_id == p.id,
                                                 Task.seq == task)).first()
        w = s.exec(Worker.__table__.select().where(Worker.project_id == p.id,
                                                   Worker.seq == worker)).first()
        aid = f"a{task}-{worker}"
        s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                         expires=utcnow(), state=state))
        if state == "submitted":
            s.flush()
            s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                        value="a"))


def _status(eng, report=project_status):
    with session_scope(eng) as s:
        return report(s, get_project(s, "st"))


def test_one_paused_the_rest_having_labelled_everything_is_stalled(db_url):
    # Given 3 annotators, max-labels 3, 5 tasks
    eng = _project(db_url)
    assert _status(eng)["state"] == "running" and _status(eng)["stalled"] is None
    # When two label every task and the third labels two, then is paused
    for t in range(5):
        _label(eng, t, 0)
        assert _status(eng)["state"] == "running"  # the others have not seen them
        _label(eng, t, 1)
    _label(eng, 0, 2)
    _label(eng, 1, 2)
    assert _status(eng)["state"] == "running"  # st-w2 can still give the 3 labels
    with session_scope(eng) as s:
        set_worker_status(s, "st-w2", "paused")
    # Then the 3 tasks below the cap are stalled, the state says so, with the ways out
    st = _status(eng)
    assert st["finished"] is None and st["state"] == "stalled"
    assert st["tasks"]["in_progress"] == 3
    assert st["stalled"]["tasks"] == 3 and st["stalled"]["all"] is True
    assert stall_text(st["stalled"]) == \
        "stalled: 3 tasks need a label no active annotator can give"
    reasons = " | ".join(st["stalled"]["reasons"])
    assert "1 annotator paused: st-w2" in reasons
    assert "2 annotators having labelled or seen every open task" in reasons
    ways = st["stalled"]["ways_out"]
    assert ways[0].startswith("enrol an annotator: labelq workers enroll st ")
    assert "resume a paused one: labelq workers resume st-w2" in ways
    assert any(w.startswith("lower --max-labels: labelq project update st --max-labels")
               for w in ways)
    assert ways[-1] == "finish as is: labelq export st"
    # and nothing is left to spend: no budget projection
    assert st["spendable"] == 0.0
    # When the paused one is resumed, it runs again
    with session_scope(eng) as s:
        set_worker_status(s, "st-w2", "active")
    assert _status(eng)["state"] == "running"


def test_declined_and_expired_tasks_count_as_seen(db_url):
    eng = _project(db_url, n_tasks=2, cap=2, workers=2)
    _label(eng, 0, 0)
    _label(eng, 1, 0, "declined")
    _label(eng, 0, 1, "expired")
    assert _status(eng)["state"] == "running"  # st-w1 has not seen t1
    _label(eng, 1, 1)
    # t0: 1 label, seen by both; t1: 1 label, seen by both
    st = _status(eng)
    assert st["state"] == "stalled" and st["stalled"]["tasks"] == 2


def test_capacity_spent_and_everyone_paused(db_url):
    eng = _project(db_url, n_tasks=4, cap=2, workers=2, capacity=1)
    _label(eng, 0, 0)
    assert _status(eng)["state"] == "running"
    _label(eng, 1, 1)
    st = _status(eng)
    assert st["state"] == "stalled" and st["stalled"]["tasks"] == 4
    assert "2 annotators at their capacity" in st["stalled"]["reasons"][0]


def test_no_active_annotator_or_none_enrolled(db_url):
    eng = _project(db_url, n_tasks=2, workers=0)
    st = _status(eng)
    assert st["state"] == "stalled" and st["stalled"]["reasons"] == ["no annotator enrolled"]
    with session_scope(eng) as s:
        enroll_worker(s, get_project(s, "st"), "st-late")
    assert _status(eng)["state"] == "running"
    with session_scope(eng) as s:
        set_worker_status(s, "st-late", "removed")
    st = _status(eng)
    assert st["state"] == "stalled" and "1 annotator removed: st-late" in st["stalled"]["reasons"]


def test_a_category_nobody_active_works_on_is_a_partial_stall(db_url):
    eng = _project(db_url, n_tasks=4, workers=0, categories={0: "x", 1: "x", 2: "y", 3: "y"})
    with session_scope(eng) as s:
        enroll_worker(s, get_project(s, "st"), "st-x", categories=["x"])
    st = _status(eng)
    assert st["state"] == "running"
    assert st["stalled"]["all"] is False and st["stalled"]["tasks"] == 2
    assert st["stalled"]["categories"] == ["y"]
    assert stall_text(st["stalled"]) == \
        "stalled: 2 tasks need a label no active annotator can give (category y)"
    assert "--categories y" in st["stalled"]["ways_out"][0]


def test_no_cap_stalls_only_when_everyone_has_seen_everything(db_url):
    eng = _project(db_url, n_tasks=2, cap=None, workers=1)
    _label(eng, 0, 0)
    assert _status(eng)["state"] == "running"
    _label(eng, 1, 0)
    st = _status(eng)
    assert st["state"] == "stalled" and st["stalled"]["tasks"] == 2
    assert not any("max-labels" in w for w in st["stalled"]["ways_out"])


def test_a_finished_project_is_not_stalled(db_url):
    eng = _project(db_url, n_tasks=1, cap=1, workers=1)
    _label(eng, 0, 0)
    st = _status(eng)
    assert st["state"] == "finished" and st["stalled"] is None


def test_gold_without_a_schedule_is_reported(db_url):
    eng = _project(db_url, n_tasks=1, workers=1)
    with session_scope(eng) as s:
        p = get_project(s, "st")
        s.add(Task(project_id=p.id, seq=1, external_id="g1", is_gold=True, gold_answer="a"))
    st = _status(eng, status_report)
    assert st["gold_unscheduled"] == 1
    assert gold_unscheduled(st) == [
        "1 gold question is loaded but project 'st' has no gold schedule: it is never "
        "served; set one: labelq project update st --gold-schedule fixed:rate=0.1 "
        "(docs/gold.md)"]
    with session_scope(eng) as s:
        update_project(s, "st", gold_schedule="fixed:rate=0.1")
    st = _status(eng, status_report)
    assert st["gold_unscheduled"] == 0 and gold_unscheduled(st) == []


def test_the_exact_check_is_bounded_and_its_answer_kept(db_url, monkeypatch):
    from labelq.record import stalls

    eng = _project(db_url, n_tasks=3, cap=3, workers=2)
    for t in range(3):
        _label(eng, t, 0)
        _label(eng, t, 1)
    # Given a stall that only the exact check (step 2) can see
    monkeypatch.setattr(stalls, "_KEPT", {})
    # When that check may read fewer assignments than it would need
    monkeypatch.setattr(stalls, "READ_MAX", 5)
    st = _status(eng)
    # Then the stall is not claimed either way (not known), and the project reads running
    assert st["stalled"] is None and st["state"] == "running"
    # When it may read them, the stall is found, and kept while nothing changes
    monkeypatch.setattr(stalls, "READ_MAX", 6)
    assert _status(eng)["state"] == "stalled"
    reads = []
    real = stalls._seen_open
    monkeypatch.setattr(stalls, "_seen_open", lambda *a: reads.append(a) or real(*a))
    assert _status(eng)["state"] == "stalled" and reads == []
    # and asked again at once when who can label changes (a third annotator enrolled)
    with session_scope(eng) as s:
        enroll_worker(s, get_project(s, "st"), "st-new")
    assert _status(eng)["state"] == "running"
