"""Marking loaded tasks as gold (``labelq gold mark``): SQL and the hot state move together,
the labels on them score their annotators, an assigned task is refused, and a file is all
or nothing. Real Redis; SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.errors import Conflict
from labelq.exporting import aggregate_project, aggregated_rows, load_project_labels
from labelq.live.goldmark import mark_gold_live
from labelq.live.hotstate import StateCache
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label, Project, Task, Worker
from labelq.record.projects import GoldMark
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import hot_sets, make_project


def label_everything_once(svc: Service, handles) -> dict[str, dict[str, str]]:
    """Each worker takes and answers assignments until none is left: ``p-w0`` answers 'b',
    the others 'a'. Returns task -> {worker: answer}."""
    given: dict[str, dict[str, str]] = {}
    for h in handles:
        while (a := svc.next_assignment(h)) is not None:
            value = "b" if h == "p-w0" else "a"
            svc.submit(h, a.assignment_id, value)
            given.setdefault(a.task, {})[h] = value
    return given


@pytest.mark.timeout(120)
def test_marked_tasks_become_gold_in_sql_and_redis_and_judge_their_labels(r, db_url):
    # Given 6 tasks in two categories, each labelled by three annotators (p-w0 always 'b',
    # the others 'a'), a gold schedule and a quality rule that acts on one wrong gold answer
    eng, pid = make_project(db_url, n_tasks=6, workers=3, max_labels=3, categories=("x", "y"),
                            gold_schedule="fixed:rate=0.2",
                            quality={"threshold": 0.8, "min_gold": 1, "confidence": 0.6})
    svc = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0,
                  state_max_age=0, rng=np.random.default_rng(0))
    given = label_everything_once(svc, ["p-w0", "p-w1", "p-w2"])
    assert sorted(given) == [f"t{i}" for i in range(6)]
    cache = StateCache()
    from labelq.live.applier import Applier
    Applier(eng, r, cache=cache).apply_pending(pid, refill=False)
    epoch0 = int(r.hget(Keys(pid, database_id(eng)).meta, "epoch") or 0)
    # When an expert's answers for t0 and t3 ('a': p-w0 was wrong on both) are marked as
    # a random sample (kind audit: the answers to chosen tasks score no one, below)
    out = mark_gold_live(eng, r, "p", [GoldMark("t0", "a"), GoldMark("t3", "a")], kind="audit")
    # Then both are gold in SQL, their 6 labels gold answers, and p-w0 is paused
    assert out == {"project": "p", "marked": 2, "skipped": 0, "labels": 6,
                   "kinds": {"audit": 2}, "paused": ["p-w0"], "queued": [], "replaced": [],
                   "live": True}
    with session_scope(eng) as s:
        rows = {t.external_id: t for t in s.exec(select(Task).where(Task.project_id == pid))}
        assert {e for e, t in rows.items() if t.is_gold} == {"t0", "t3"}
        assert rows["t0"].gold_answer == "a" and rows["t0"].marked is not None
        assert rows["t1"].marked is None
        gold_labels = s.exec(select(Label.task_id).where(Label.project_id == pid,
                                                         Label.is_gold)).all()
        assert sorted(gold_labels) == sorted([rows["t0"].id] * 3 + [rows["t3"].id] * 3)
        assert s.exec(select(Worker.status).where(Worker.handle == "p-w0")).one() == "paused"
    # and in Redis: gold, not open; a new epoch; the schedule counts and gold records as a
    # rebuild from SQL sets them (t0 is category x = 0, t3 category y = 1)
    k = Keys(pid, database_id(eng))
    now = hot_sets(r, pid, eng)
    assert 0 in now["gold"] and 3 in now["gold"]
    assert 0 not in now["pending"] + now["parked"] and 3 not in now["pending"] + now["parked"]
    assert int(r.hget(k.meta, "epoch")) == epoch0 + 1
    for w in (0, 1, 2):
        assert now["nissued"][f"g{w}:0"] >= 1 and now["nissued"][f"g{w}:1"] >= 1
        assert now["nissued"][f"ga{w}"] >= 2
    assert now["nissued"]["gr0"] == 0 and now["nissued"]["gr1"] == now["nissued"]["ga1"]
    rebuild_project(eng, r, pid)
    assert hot_sets(r, pid, eng) == now
    # and the running policy folds the labels again with t0 and t3 gold
    hot = cache.get(eng, r, pid)
    assert hot.view.is_gold[0] and hot.view.is_gold[3] and not hot.view.is_gold[1]
    # and the export still has them, with their known answer
    with session_scope(eng) as s:
        project = s.get(Project, pid)
        pl = load_project_labels(s, project)
        rows_out = {row["task"]: row for row in
                    aggregated_rows(pl, aggregate_project(s, project, pl, "mv"))}
    assert sorted(rows_out) == [f"t{i}" for i in range(6)]
    assert rows_out["t0"]["label"] == "a" and rows_out["t0"]["confidence"] == 1.0
    assert rows_out["t0"]["p_a"] == 1.0 and rows_out["t0"]["n_labels"] == 3
    assert rows_out["t0"]["source"] == "gold" and rows_out["t1"]["source"] != "gold"
    assert rows_out["t0"]["evidence"] == "gold"  # an audit answer: random gold
    # and marking them again is a no-op that says so
    again = mark_gold_live(eng, r, "p", [GoldMark("t0", "a")])
    assert (again["marked"], again["skipped"]) == (0, 1)


def test_a_task_assigned_right_now_is_queued_and_marked_when_its_assignment_ends(r, db_url):
    # Given a task leased to an annotator this moment
    from labelq.live.goldmark import apply_queued_marks
    from labelq.record.models import PendingGoldMark
    eng, pid = make_project(db_url, n_tasks=3, workers=2)
    svc = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0,
                  state_max_age=0)
    a = svc.next_assignment("p-w0")
    assert a is not None
    other = next(f"t{i}" for i in range(3) if f"t{i}" != a.task)
    k = Keys(pid, database_id(eng))
    # When it is marked gold with another task, from an expert's file
    out = mark_gold_live(eng, r, "p", [GoldMark(other, "a"), GoldMark(a.task, "b")],
                         source="expert/answers.csv")
    # Then the other is gold now, and the assigned one is queued (in SQL, flagged in Redis)
    assert (out["marked"], out["queued"]) == (1, [a.task])

    def gold() -> dict[str, str | None]:
        with session_scope(eng) as s:
            return dict(s.exec(select(Task.external_id, Task.gold_answer)
                               .where(Task.project_id == pid, Task.is_gold)).all())

    def queued() -> list[tuple[str, str]]:
        with session_scope(eng) as s:
            return [tuple(x) for x in s.exec(
                select(Task.external_id, PendingGoldMark.answer)
                .join(PendingGoldMark, PendingGoldMark.task_id == Task.id)).all()]

    assert gold() == {other: "a"} and queued() == [(a.task, "b")]

    def sources() -> dict[str, str | None]:
        with session_scope(eng) as s:
            return dict(s.exec(select(Task.external_id, Task.gold_source)
                               .where(Task.project_id == pid, Task.is_gold)).all())

    assert sources() == {other: "expert/answers.csv"}  # (where the answer came from)
    assert r.exists(k.gold_queued) and not r.sismember(k.gold, int(a.task[1:]))
    # (and it is handed out no more: out of pending and parked while it waits)
    sets = hot_sets(r, pid, eng)
    assert int(a.task[1:]) not in sets["pending"] + sets["parked"]
    # and while it is assigned, applying the queue leaves it queued
    assert apply_queued_marks(eng, r, pid) == {"applied": [], "waiting": 1}
    # and queueing it again with another answer is refused (the same answer is a no-op)
    with pytest.raises(Conflict, match="queued already with answer 'b'"):
        mark_gold_live(eng, r, "p", [GoldMark(a.task, "a")])
    assert mark_gold_live(eng, r, "p", [GoldMark(a.task, "b")])["queued"] == [a.task]
    assert queued() == [(a.task, "b")]
    # When the annotator's label goes in (the lease ends) and the queue is applied
    svc.submit("p-w0", a.assignment_id, "a")
    got = apply_queued_marks(eng, r, pid)
    # Then the task is gold, its label a gold answer, the queue empty, the flag gone
    assert got["applied"] == [a.task] and got["waiting"] == 0
    assert gold() == {other: "a", a.task: "b"} and queued() == []
    # (the queued answer still credited to its file: the queue row's source carried over)
    assert sources() == {other: "expert/answers.csv", a.task: "expert/answers.csv"}
    assert r.sismember(k.gold, int(a.task[1:])) and not r.exists(k.gold_queued)
    with session_scope(eng) as s:
        assert s.exec(select(Label.is_gold).join(Task, Task.id == Label.task_id)
                      .where(Task.external_id == a.task)).all() == [True]
    # and applying again does nothing (applied once)
    assert apply_queued_marks(eng, r, pid) == {"applied": [], "waiting": 0}
    rebuild_project(eng, r, pid)
    assert r.sismember(k.gold, int(a.task[1:]))


@pytest.mark.parametrize("how", ["labelq rebuild", "lazy, after a flush"])
def test_a_rebuild_keeps_a_queued_task_out_of_pending_until_its_lease_ends(r, db_url, how):
    # Given a task leased to an annotator, its gold mark queued until the lease ends
    from labelq.live.goldmark import apply_queued_marks
    from labelq.live.rebuild import delete_hot
    eng, pid = make_project(db_url, n_tasks=3, workers=2)
    svc = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0,
                  state_max_age=0)
    a = svc.next_assignment("p-w0")
    assert a is not None
    assert mark_gold_live(eng, r, "p", [GoldMark(a.task, "b")])["queued"] == [a.task]
    k, seq = Keys(pid, database_id(eng)), int(a.task[1:])
    # When the hot state is rebuilt from SQL: by `labelq rebuild`, or by the first request
    # after Redis lost it
    if how == "labelq rebuild":
        assert rebuild_project(eng, r, pid)["queued"] == 1
    else:
        delete_hot(r, k)
        b = svc.next_assignment("p-w1")
        assert b is not None and b.task != a.task
    # Then the task stays out of pending and parked (as while its mark waited), not gold
    # yet, the queue flagged for the applier
    sets = hot_sets(r, pid, eng)
    assert seq not in sets["pending"] + sets["parked"] + sets["gold"]
    assert r.exists(k.gold_queued)
    # When the annotator's label goes in (the lease lost with Redis, taken again) and the
    # queue is applied
    svc.submit("p-w0", a.assignment_id, "a")
    got = apply_queued_marks(eng, r, pid)
    # Then the task is gold with the queued answer, its label a gold answer
    assert got["applied"] == [a.task] and got["waiting"] == 0
    assert r.sismember(k.gold, seq) and not r.exists(k.gold_queued)
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.project_id == pid, Task.external_id == a.task)).one()
        assert (t.is_gold, t.gold_answer) == (True, "b")
        assert s.exec(select(Label.is_gold).where(Label.task_id == t.id)).all() == [True]


def test_a_lease_taken_between_the_check_and_the_script_is_queued_too(r, sqlite_url,
                                                                       monkeypatch):
    # Given two open tasks, and an annotator who takes one right after the lease check
    import labelq.live.goldmark as gm
    eng, pid = make_project(sqlite_url, n_tasks=2, workers=1, max_labels=1)
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                  state_max_age=0)
    rebuild_project(eng, r, pid)
    real, taken = gm._leased, []

    def leased_then_taken(*args):
        out = real(*args)
        if not taken:
            taken.append(svc.next_assignment("p-w0"))
        return out

    monkeypatch.setattr(gm, "_leased", leased_then_taken)
    # When both are marked
    out = mark_gold_live(eng, r, "p", [GoldMark("t0", "a"), GoldMark("t1", "a")])
    # Then the one taken meanwhile is queued, the other marked: nothing half-done
    assert taken[0] is not None
    assert out["queued"] == [taken[0].task] and out["marked"] == 1
    k = Keys(pid, database_id(eng))
    free = 1 - int(taken[0].task[1:])
    assert r.sismember(k.gold, free) and not r.sismember(k.gold, 1 - free)


def test_the_cli_marks_from_a_file_all_or_nothing(r, redis_url, sqlite_url, tmp_path):
    eng, pid = make_project(sqlite_url, n_tasks=4, n_gold=1, workers=1)
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url}

    def mark(*args):
        return CliRunner().invoke(cli, ["gold", "mark", "p", *args], env=env)

    def gold_ids():
        with session_scope(eng) as s:
            return sorted(s.exec(select(Task.external_id).where(Task.project_id == pid,
                                                                Task.is_gold)))

    cases = [("id,answer\nt0,a\nt1,c\n", "line 3, field 'answer'", "not in the label set"),
             ("id,answer\nt0,a\nnope,a\n", "line 3, field 'id'", "no task 'nope'"),
             ("id,answer\nt0,a\ng0,b\n", "line 3, field 'answer'", "labelq gold correct"),
             ("id,answer\nt0,a\nt0,b\n", "line 3, field 'id'", "duplicate id")]
    for text, where, what in cases:
        f = tmp_path / "marks.csv"
        f.write_text(text)
        res = mark("--file", str(f))
        assert res.exit_code == 3, res.output
        assert where in res.output and what in res.output, res.output
        assert gold_ids() == ["g0"]  # nothing marked
    f.write_text("id,answer,note\nt0,a,checked\nt2,b,\ng0,a,\n")
    res = mark("--file", str(f))
    assert res.exit_code == 0, res.output
    assert ("marked 2 tasks of 'p' as gold questions (0 labels on them now gold answers); "
            "1 already gold with that answer, skipped") in res.output
    assert gold_ids() == ["g0", "t0", "t2"]
    res = mark("t1", "b", "-o", "json")
    assert res.exit_code == 0 and '"marked": 1' in res.output, res.output
    import json
    shown = [json.loads(CliRunner().invoke(cli, ["tasks", "show", "p", t, "-o", "json"],
                                           env=env).output) for t in ("t1", "t3", "g0")]
    assert shown[0]["gold"] and shown[0]["gold_answer"] == "b"
    assert shown[0]["marked"].endswith("+00:00")  # when (ISO 8601, UTC)
    assert shown[1]["marked"] is None and shown[2]["marked"] is None  # (loaded as gold)
    # (of kinds: t1 chosen by the operator, never drawn: reviewed; g0 loaded as gold)
    assert [x["gold_kind"] for x in shown] == ["reviewed", None, "loaded"]
    assert mark("t3").exit_code == 2 and mark("t3", "a", "--file", str(f)).exit_code == 2
    assert mark("nope", "a").exit_code == 4


def test_reservations_held_in_inboxes_are_released_not_refused(r, sqlite_url):
    # Given reservations the applier holds in the inboxes of two active annotators, none
    # of them handed out yet
    from labelq.live.applier import Applier
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=2)
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url, inbox_size=2),
                  worker_max_age=0, state_max_age=0)
    taken = {h: svc.next_assignment(h) for h in ("p-w0", "p-w1")}  # (active now)
    assert Applier(eng, r, settings=Settings(database_url=sqlite_url, inbox_size=2)) \
        .refill_project(pid) > 0
    k = Keys(pid, database_id(eng))
    held = {}
    for a in r.zrange(k.leases, 0, -1):
        task, is_held = r.hmget(k.lease(a.decode()), "task", "held")
        if is_held:
            held[int(task)] = a.decode()
    free = sorted(set(held) - {int(a.task[1:]) for a in taken.values()})
    assert free
    # When one of those tasks is marked gold
    out = mark_gold_live(eng, r, "p", [GoldMark(f"t{free[0]}", "a")])
    # Then it goes through: the reservation is released (no lease, no count left) and
    # the task is gold
    assert out["marked"] == 1
    assert not r.exists(k.lease(held[free[0]]))
    assert int(r.hget(k.reserved, free[0]) or 0) == 0
    assert r.sismember(k.gold, free[0])


@pytest.mark.timeout(180)
def test_with_a_celery_applier_a_marked_task_is_then_served_as_gold(
        r, redis_url, sqlite_url, celery_env, celery_worker):
    # Given four tasks, one label each from p-w0 (who answers 'b'), applied by a real
    # Celery worker, and a schedule that gives gold whenever there is unseen gold
    from labelq.record.goldstats import gold_scores
    from workers.main import create_app

    from .test_celery import wait_applied
    eng, pid = make_project(sqlite_url, n_tasks=4, workers=2, max_labels=1,
                            gold_schedule="fixed:rate=1")
    app = create_app(redis_url)
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                  notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                 queue="labelq"))
    celery_worker(celery_env(sqlite_url))
    assert sorted(label_everything_once(svc, ["p-w0"])) == ["t0", "t1", "t2", "t3"]
    wait_applied(eng, pid, 4)
    assert svc.next_assignment("p-w1") is None  # every task at its cap; no gold yet
    # When the expert's answer for t0 ('a') is marked as a random sample's
    runner = CliRunner().invoke(cli, ["gold", "mark", "p", "t0", "a", "--kind", "audit"],
                                env={"LABELQ_DATABASE_URL": sqlite_url,
                                     "LABELQ_REDIS_URL": redis_url})
    assert runner.exit_code == 0, runner.output
    # Then p-w1 gets it as a gold question (outside the cap), whose answer is a gold answer
    a = svc.next_assignment("p-w1")
    assert a is not None and a.task == "t0"
    svc.submit("p-w1", a.assignment_id, "a")
    wait_applied(eng, pid, 5)
    with session_scope(eng) as s:
        assert all(s.exec(select(Label.is_gold).join(Task, Task.id == Label.task_id)
                          .where(Task.external_id == "t0")))
        scores = gold_scores(s, pid, [0, 1], [""])
    assert scores.total.sum(axis=1).tolist() == [1, 1]  # p-w0's old label, p-w1's new one
    assert scores.correct.sum(axis=1).tolist() == [0, 1]
    assert svc.next_assignment("p-w1") is None  # (never the same gold twice)


@pytest.mark.timeout(240)
def test_gold_mark_of_a_file_marks_the_rest_at_once_and_assigned_tasks_when_they_end(
        r, redis_url, sqlite_url, celery_env, celery_worker, tmp_path):
    # Given four tasks, a real Celery worker (applier and beat), and two of the tasks
    # assigned right now: one to p-w0, one to p-w1
    from workers.main import create_app
    eng, pid = make_project(sqlite_url, n_tasks=4, workers=2, max_labels=1)
    app = create_app(redis_url)
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                  notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                 queue="labelq"))
    celery_worker(celery_env(sqlite_url))
    a0, a1 = svc.next_assignment("p-w0"), svc.next_assignment("p-w1")
    assert a0 is not None and a1 is not None
    assigned = sorted([a0.task, a1.task])
    rest = sorted({"t0", "t1", "t2", "t3"} - set(assigned))

    def gold() -> list[str]:
        with session_scope(eng) as s:
            return sorted(s.exec(select(Task.external_id).where(Task.project_id == pid,
                                                                Task.is_gold)))

    # When an expert's file of all four is marked
    f = tmp_path / "answers.csv"
    f.write_text("id,answer\n" + "".join(f"t{i},a\n" for i in range(4)))
    res = CliRunner().invoke(cli, ["gold", "mark", "p", "--file", str(f)],
                             env={"LABELQ_DATABASE_URL": sqlite_url,
                                  "LABELQ_REDIS_URL": redis_url})
    # Then the two free tasks are gold at once, and the output names the two queued
    assert res.exit_code == 0, res.output
    order = [t for t in ("t0", "t1", "t2", "t3") if t in assigned]
    assert (f"2 marked, 2 queued until their assignments end: {', '.join(order)}"
            in res.output), res.output
    assert gold() == rest
    # and while they stay assigned, the worker's beat (every second) leaves them queued
    import time
    time.sleep(3)
    assert gold() == rest
    # When p-w0 submits its label (the applier runs) and p-w1 declines its task
    svc.submit("p-w0", a0.assignment_id, "b")
    deadline = time.monotonic() + 60
    while a0.task not in gold() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gold() == sorted(rest + [a0.task])  # (only the ended one)
    svc.decline("p-w1", a1.assignment_id)
    while a1.task not in gold() and time.monotonic() < deadline:
        time.sleep(0.2)
    # Then both are gold too, p-w0's label a gold answer, and nothing stays queued
    assert gold() == ["t0", "t1", "t2", "t3"]
    from labelq.record.models import PendingGoldMark
    with session_scope(eng) as s:
        assert s.exec(select(PendingGoldMark)).all() == []
        assert s.exec(select(Label.is_gold).join(Task, Task.id == Label.task_id)
                      .where(Task.external_id == a0.task)).all() == [True]
        kinds = set(s.exec(select(Task.gold_kind).where(Task.project_id == pid)))
    assert kinds == {"reviewed"}
    k = Keys(pid, database_id(eng))
    assert all(r.sismember(k.gold, int(t[1:])) for t in ("t0", "t1", "t2", "t3"))


@pytest.mark.timeout(120)
def test_a_queued_mark_is_applied_by_the_beat_when_the_lease_expires(r, sqlite_url):
    # Given a task whose one-second lease an annotator lets lapse, queued for a mark
    import time

    from labelq.live.applier import Applier
    from labelq.live.upkeep import maintain_project
    settings = Settings(database_url=sqlite_url, lease_seconds=1)
    eng, pid = make_project(sqlite_url, n_tasks=2, workers=1)
    svc = Service(eng, r, settings=settings, worker_max_age=0, state_max_age=0)
    a = svc.next_assignment("p-w0")
    assert a is not None
    assert mark_gold_live(eng, r, "p", [GoldMark(a.task, "a")])["queued"] == [a.task]
    applier = Applier(eng, r, settings=settings)
    assert maintain_project(applier, pid)["gold_marked"] == 0  # (still assigned)
    # When the lease has lapsed (1 s, and the reaper's 2 s grace) and the beat's upkeep runs
    time.sleep(3.5)
    out = maintain_project(applier, pid)
    # Then the reaper expired it and the queued mark was applied: gold, no queue left
    assert out["expired"] == 1 and out["gold_marked"] == 1
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.project_id == pid, Task.external_id == a.task)).one()
        assert (t.is_gold, t.gold_answer) == (True, "a")
    assert r.sismember(Keys(pid, database_id(eng)).gold, int(a.task[1:]))
