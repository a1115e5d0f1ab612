"""Status from the counters (labelq/record/tally.py, labelq/reporting.py) equals a recount
from scratch after a random sequence of labels, declines, expiries, applies, folds, tasks
loaded and tasks made gold (labelq gold mark) — per worker labels, gold answers, declined,
expired, the gold warnings — on SQLite and PostgreSQL; counters of an earlier layout are
folded again; the gold warnings' and made-gold reads are index ranges."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest
import sqlalchemy
from sqlmodel import select

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.goldstats import gold_exhaustion
from labelq.record.models import Assignment, Label, StatusTally, Task, Worker, utcnow
from labelq.record.projects import (
    GoldMark,
    create_project,
    enroll_worker,
    get_project,
    mark_gold,
)
from labelq.record.tally import VERSION, fold, forget_schema
from labelq.reporting import status_report

STATES = ("unlabeled", "in_progress", "complete", "gold")


def _reference(s, project):
    """Every number of status_report, counted over every row."""
    cap = project.max_labels
    tasks = s.exec(select(Task).where(Task.project_id == project.id)).all()
    labels = s.exec(select(Label).where(Label.project_id == project.id)).all()
    ended = s.exec(select(Assignment).where(Assignment.project_id == project.id,
                                            Assignment.state.in_(("declined", "expired")))
                   ).all()
    n = Counter(lb.task_id for lb in labels)
    by_state, by_cat = Counter(), {}
    for t in tasks:
        st = ("gold" if t.is_gold else "unlabeled" if n[t.id] == 0 else
              "complete" if cap and n[t.id] >= cap else "in_progress")
        by_state[st] += 1
        by_cat.setdefault(t.category, Counter())[st] += 1
    per_w = Counter(lb.worker_id for lb in labels)
    gold_w = Counter(lb.worker_id for lb in labels if lb.is_gold)
    closed = Counter((a.worker_id, a.state) for a in ended)
    workers = s.exec(select(Worker).where(Worker.project_id == project.id)
                     .order_by(Worker.seq)).all()
    return {"tasks": {k: by_state[k] for k in STATES},
            "categories": [{"category": c, **{k: by_cat[c][k] for k in STATES}}
                           for c in sorted(by_cat)],
            "labels": len(labels),
            "unapplied": sum(1 for lb in labels if lb.applied_seq is None),
            "workers": [(w.handle, per_w[w.id], gold_w[w.id], closed[(w.id, "declined")],
                         closed[(w.id, "expired")]) for w in workers],
            "gold_warnings": sorted(map(str, gold_exhaustion(s, project)))}


def _check(engine):
    with session_scope(engine) as s:
        p = get_project(s, "r")
        st = status_report(s, p)
        ref = _reference(s, p)
    got = {"tasks": st["tasks"], "categories": st["categories"], "labels": st["labels"],
           "unapplied": st["unapplied"],
           "workers": [(w["handle"], w["labels"], w["gold_answered"], w["declined"],
                        w["expired"]) for w in st["workers"]],
           "gold_warnings": sorted(map(str, st["gold_warnings"]))}
    assert got == ref
    return st


class World:
    def __init__(self, engine, rng):
        self.engine, self.rng, self.n_tasks, self.seq, self.aid = engine, rng, 0, 0, 0

    def load(self, n, gold_every=0):
        with session_scope(self.engine) as s:
            p = get_project(s, "r")
            for i in range(self.n_tasks, self.n_tasks + n):
                g = bool(gold_every) and i % gold_every == 0
                s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}",
                           category=f"c{i % 3}", is_gold=g, gold_answer="a" if g else None))
        self.n_tasks += n

    def assign(self, state, k):
        with session_scope(self.engine) as s:
            p = get_project(s, "r")
            tasks = s.exec(select(Task).where(Task.project_id == p.id)).all()
            workers = s.exec(select(Worker).where(Worker.project_id == p.id)).all()
            for _ in range(k):
                t, w = self.rng.choice(tasks), self.rng.choice(workers)
                self.aid += 1
                aid = f"a{self.aid}"
                s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                                 is_gold=t.is_gold, expires=utcnow() + timedelta(minutes=5),
                                 state=state))
                if state == "submitted":
                    s.flush()
                    s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id,
                                worker_id=w.id, value=self.rng.choice("ab"),
                                is_gold=t.is_gold))

    def apply(self):
        with session_scope(self.engine) as s:
            p = get_project(s, "r")
            for lb in s.exec(select(Label).where(Label.project_id == p.id,
                                                 Label.applied_seq.is_(None))
                             .order_by(Label.id)).all():
                self.seq += 1
                lb.applied_seq = self.seq

    def fold(self):
        with session_scope(self.engine) as s:
            return fold(s, get_project(s, "r").id)

    def mark(self):
        with session_scope(self.engine) as s:
            p = get_project(s, "r")
            plain = s.exec(select(Task).where(Task.project_id == p.id,
                                              Task.is_gold.is_(False))).all()
            if plain:
                mark_gold(s, p, [GoldMark(self.rng.choice(plain).external_id, "a")])


def test_counters_equal_a_recount_after_a_random_sequence(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    rng = random.Random(11)
    with session_scope(engine) as s:
        p = create_project(s, "r", "a,b", max_labels=3, gold_schedule="fixed:rate=0.3")
        for h in ("u", "v", "w"):
            enroll_worker(s, p, h)
    world = World(engine, rng)
    world.load(12, gold_every=4)
    _check(engine)
    ops = ["label"] * 6 + ["decline"] * 2 + ["expire"] * 2 + ["apply"] * 3 + ["fold"] * 3 \
        + ["mark", "load"]
    warned = 0
    for _ in range(60):
        op = rng.choice(ops)
        if op == "label":
            world.assign("submitted", rng.randint(1, 6))
        elif op in ("decline", "expire"):
            world.assign(op + "d", rng.randint(1, 3))
        elif op == "apply":
            world.apply()
        elif op == "fold":
            world.fold()
        elif op == "mark":
            world.mark()
        else:
            world.load(rng.randint(1, 5), gold_every=rng.choice((0, 2)))
        warned += bool(_check(engine)["gold_warnings"])
    world.apply()
    assert world.fold() > 0
    st = _check(engine)
    assert warned and st["tasks"]["gold"] > 4  # the sequence reached both (not vacuous)
    assert any(w["declined"] for w in st["workers"]) and any(w["expired"] for w in st["workers"])
    engine.dispose()


def test_counters_of_an_earlier_layout_are_folded_again(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        p = create_project(s, "r", "a,b", max_labels=2)
        enroll_worker(s, p, "u")
        enroll_worker(s, p, "v")
    world = World(engine, random.Random(3))
    world.load(10, gold_every=3)
    world.assign("submitted", 12)
    world.apply()
    assert world.fold() == 12
    with session_scope(engine) as s:  # as an earlier labelq left them: no version
        row = s.get(StatusTally, get_project(s, "r").id)
        assert row.version == VERSION
        row.version = None
    _check(engine)  # read from the labels meanwhile
    assert world.fold() == 12  # folded again from nothing
    with session_scope(engine) as s:
        assert s.get(StatusTally, get_project(s, "r").id).version == VERSION
    _check(engine)
    engine.dispose()


def test_status_reads_gold_assignments_and_marked_tasks_by_index(tmp_path):
    """On SQLite, the plans of the two reads that grow with the project: made-gold tasks
    and each annotator's gold questions are ranges of their partial indexes."""
    engine = engine_for(f"sqlite:///{tmp_path / 'plan.db'}")
    init_schema(engine)
    with engine.connect() as c:
        marked = " ".join(r[-1] for r in c.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT task.id FROM task WHERE task.project_id = 1 "
            "AND task.marked IS NOT NULL").all())
        gold = " ".join(r[-1] for r in c.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT assignment.worker_id, count(distinct(assignment.task_id))"
            " FROM assignment WHERE assignment.project_id = 1 AND assignment.is_gold = 1 "
            "AND assignment.worker_id IN (1, 2) GROUP BY assignment.worker_id").all())
    assert "ix_task_project_marked" in marked
    assert "ix_assignment_gold" in gold
    engine.dispose()


@pytest.mark.parametrize("table,index", [("task", "ix_task_project_marked"),
                                          ("assignment", "ix_assignment_gold")])
def test_init_adds_the_new_indexes_to_an_older_database(tmp_path, table, index):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = engine_for(url)
    init_schema(engine)
    with engine.begin() as c:
        c.exec_driver_sql(f"DROP INDEX {index}")
    assert index not in {i["name"] for i in sqlalchemy.inspect(engine).get_indexes(table)}
    init_schema(engine)
    assert index in {i["name"] for i in sqlalchemy.inspect(engine).get_indexes(table)}
    engine.dispose()


def _ended_counts(engine):
    with engine.connect() as c:
        tally = {(w, s): n for w, s, n in c.exec_driver_sql(
            "SELECT worker_id, state, n FROM ended_tally").all() if n}
        recount = {(w, s): n for w, s, n in c.exec_driver_sql(
            "SELECT worker_id, state, count(*) FROM assignment WHERE state IN "
            "('declined', 'expired') GROUP BY worker_id, state").all()}
    return tally, recount


def test_ended_tally_follows_inserts_updates_deletes_and_init_installs_it(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        p = create_project(s, "r", "a,b")
        enroll_worker(s, p, "u")
        enroll_worker(s, p, "v")
    world = World(engine, random.Random(5))
    world.load(6)
    world.assign("declined", 5)
    world.assign("expired", 4)
    world.assign("submitted", 3)
    tally, recount = _ended_counts(engine)
    assert tally == recount and sum(recount.values()) == 9
    with engine.begin() as c:  # a state changed, one deleted, one issued then ended
        a, b = [r[0] for r in c.exec_driver_sql(
            "SELECT id FROM assignment WHERE state = 'declined' ORDER BY id").all()][:2]
        c.exec_driver_sql(f"UPDATE assignment SET state = 'expired' WHERE id = '{a}'")
        c.exec_driver_sql(f"DELETE FROM assignment WHERE id = '{b}'")
    tally, recount = _ended_counts(engine)
    assert tally == recount and sum(recount.values()) == 8
    # a database of an earlier labelq: no triggers, no tally; assignments ended meanwhile
    with engine.begin() as c:
        if engine.dialect.name == "sqlite":
            for name in ("tr_ended_insert", "tr_ended_leave", "tr_ended_enter",
                         "tr_ended_delete"):
                c.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            c.exec_driver_sql("DROP TRIGGER tr_ended_tally ON assignment")
        c.exec_driver_sql("DROP TABLE ended_tally")
    forget_schema()  # (this process read the database with the table)
    world.assign("declined", 3)
    _check(engine)  # (status counts them in the index meanwhile)
    init_schema(engine)  # labelq init: the table, its triggers, its counts
    tally, recount = _ended_counts(engine)
    assert tally == recount and sum(recount.values()) == 11
    world.assign("expired", 2)
    tally, recount = _ended_counts(engine)
    assert tally == recount and sum(recount.values()) == 13
    init_schema(engine)  # again: nothing counted twice
    assert _ended_counts(engine)[0] == recount
    _check(engine)
    engine.dispose()
