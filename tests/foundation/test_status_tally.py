"""Status from counters (labelq/record/tally.py) equals status counted over every label: as labels
arrive unapplied, are applied, are folded, as tasks are loaded, a task is made gold and the
cap is raised (SQLite and PostgreSQL)."""

import random
from collections import Counter
from datetime import timedelta

from sqlmodel import select

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Project, Task, Worker, utcnow
from labelq.record.projects import (
    GoldMark,
    create_project,
    enroll_worker,
    get_project,
    mark_gold,
)
from labelq.record.tally import fold
from labelq.reporting import project_status

STATES = ("unlabeled", "in_progress", "complete", "gold")


def _reference(s, project):
    cap = project.max_labels
    tasks = s.exec(select(Task).where(Task.project_id == project.id)).all()
    labels = s.exec(select(Label).where(Label.project_id == project.id)).all()
    n = Counter(lb.task_id for lb in labels)
    by_state, by_cat = Counter(), {}
    for t in tasks:
        st = ("gold" if t.is_gold else "unlabeled" if n[t.id] == 0 else
              "complete" if cap and n[t.id] >= cap else "in_progress")
        by_state[st] += 1
        by_cat.setdefault(t.category, Counter())[st] += 1
    per_w = Counter(lb.worker_id for lb in labels)
    gold_w = Counter(lb.worker_id for lb in labels if lb.is_gold)
    workers = s.exec(select(Worker).where(Worker.project_id == project.id)
                     .order_by(Worker.seq)).all()
    return ({k: by_state[k] for k in STATES},
            [{"category": c, **{k: by_cat[c][k] for k in STATES}} for c in sorted(by_cat)],
            [(w.handle, per_w[w.id], gold_w[w.id]) for w in workers],
            sum(1 for lb in labels if lb.applied_seq is None))


def _check(engine):
    with session_scope(engine) as s:
        p = get_project(s, "t")
        st = project_status(s, p)
        tasks, cats, workers, unapplied = _reference(s, p)
    assert st["tasks"] == tasks
    assert st["categories"] == cats
    assert [(w["handle"], w["labels"], w["gold_answered"]) for w in st["workers"]] == workers
    assert st["unapplied"] == unapplied
    assert st["labels"] == sum(n for _, n, _ in workers)


def _load(engine, start, n, gold=()):
    with session_scope(engine) as s:
        p = get_project(s, "t")
        for i in range(start, start + n):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", category=f"c{i % 3}",
                       is_gold=i in gold, gold_answer="a" if i in gold else None))


def _label(engine, rng, k, applied_from):
    """``k`` labels on random tasks; the unapplied ones up to now get applied_seq in order
    from ``applied_from`` when it is not None."""
    with session_scope(engine) as s:
        p = get_project(s, "t")
        tasks = s.exec(select(Task).where(Task.project_id == p.id)).all()
        workers = s.exec(select(Worker).where(Worker.project_id == p.id)).all()
        for _ in range(k):
            t, w = rng.choice(tasks), rng.choice(workers)
            aid = f"a{rng.getrandbits(60)}"
            s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                             is_gold=t.is_gold, expires=utcnow() + timedelta(minutes=5),
                             state="submitted"))
            s.flush()
            s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                        value="a", is_gold=t.is_gold))
        s.flush()
        if applied_from is not None:
            seq = applied_from
            for lb in s.exec(select(Label).where(Label.project_id == p.id,
                                                 Label.applied_seq.is_(None))
                             .order_by(Label.id)).all():
                seq += 1
                lb.applied_seq = seq
            return seq
        return applied_from


def test_status_from_counters_equals_a_full_count(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    rng = random.Random(7)
    with session_scope(engine) as s:
        p = create_project(s, "t", "a,b", max_labels=3)
        for h in ("u", "v", "w"):
            enroll_worker(s, p, h)
    _load(engine, 0, 30, gold={2, 5})
    _check(engine)
    seq = _label(engine, rng, 40, 0)            # applied, not folded
    _check(engine)
    with session_scope(engine) as s:
        assert fold(s, get_project(s, "t").id) == 40
    _check(engine)
    _label(engine, rng, 25, None)               # unapplied
    _check(engine)
    _load(engine, 30, 10)                       # tasks loaded after the fold
    seq = _label(engine, rng, 20, seq)          # all applied now
    _check(engine)
    with session_scope(engine) as s:
        fold(s, get_project(s, "t").id)
        assert fold(s, get_project(s, "t").id) == 0  # nothing new
    _check(engine)
    with session_scope(engine) as s:           # a labelled task made gold, a raised cap
        # (as labelq gold mark does it: the task marked, its labels gold answers)
        p = get_project(s, "t")
        mark_gold(s, p, [GoldMark("t7", "a")])
        s.get(Project, p.id).max_labels = 5
    _check(engine)
    _label(engine, rng, 15, seq)
    with session_scope(engine) as s:
        fold(s, get_project(s, "t").id)
    _check(engine)
    engine.dispose()


def test_a_fold_committed_while_status_is_read_is_not_counted_twice(db_url, monkeypatch):
    # Given 5 labels folded into the counters and 12 more applied but not folded yet
    from labelq.record import tally

    engine = engine_for(db_url)
    init_schema(engine)
    rng = random.Random(3)
    with session_scope(engine) as s:
        p = create_project(s, "t", "a,b", max_labels=9)
        enroll_worker(s, p, "u")
    _load(engine, 0, 6)
    seq = _label(engine, rng, 5, 0)
    with session_scope(engine) as s:
        assert fold(s, get_project(s, "t").id) == 5
    _label(engine, rng, 12, seq)
    real = tally._counts_at
    folded = []

    def fold_first(session, pid, m):
        # (another process's fold commits after this read took the mark: its labels are
        # in the counters now and still after the mark this read took)
        if not folded:
            with session_scope(engine) as other:
                folded.append(fold(other, pid))
        return real(session, pid, m)

    monkeypatch.setattr(tally, "_counts_at", fold_first)
    # When the status is read across that fold
    with session_scope(engine) as s:
        st = project_status(s, get_project(s, "t"))
    # Then each label is counted once
    assert folded == [12]
    assert st["labels"] == 17 and st["workers"][0]["labels"] == 17
    assert sum(st["tasks"].values()) == 6
    monkeypatch.undo()
    _check(engine)
    engine.dispose()
