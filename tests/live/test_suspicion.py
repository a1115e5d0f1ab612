"""Issue 41: agreement evidence makes an annotator suspect (more gold), never paused; the
pause stays on gold and leaves a trail. Real Redis, the real applier, SQLite and
PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from sqlmodel import select

from labelq.errors import Forbidden
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache
from labelq.live.redis.keys import Keys, agreement_fields
from labelq.live.suspicion import agreement_counts
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label, PauseEvent, Worker, utcnow
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project

QUALITY = {"threshold": 0.6, "min_gold": 8, "confidence": 0.99, "rule": "sequential"}


def _agreement(r, eng, pid, w):
    fields = agreement_fields(w)
    vals = r.hmget(Keys(pid, database_id(eng)).nissued, list(fields))
    return tuple(float(v or 0) for v in vals)


@pytest.mark.parametrize("policy", ["auto", "uniform"])
def test_agreement_raises_a_careless_annotators_gold_rate_and_never_pauses_alone(
        r, db_url, policy):
    # Given a project whose gold schedule gives gold *only* on suspicion (base rate 0),
    # three careful annotators (w0-w2: always the truth, "a") and a careless one (w3:
    # right with probability 0.2); the applier runs after every round, inboxes unused
    eng, pid = make_project(db_url, n_tasks=80, n_gold=80, workers=4, policy=policy,
                            max_labels=5, quality=QUALITY,
                            gold_schedule="fixed:rate=0,suspect=0.9,suspect_below=0.6")
    s = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    s.assigner.rng = np.random.default_rng(0)
    rng = np.random.default_rng(1)
    applier = Applier(eng, r, cache=StateCache())
    kinds: dict[str, list[bool]] = {f"p-w{j}": [] for j in range(4)}
    suspect_before_gold = None
    for _ in range(80):
        for j in range(4):
            h = f"p-w{j}"
            try:
                a = s.next_assignment(h)
            except Forbidden:
                continue
            if a is None:
                continue
            gold = a.task.startswith("g")
            kinds[h].append(gold)
            right = j < 3 or rng.random() < 0.2
            s.submit(h, a.assignment_id, "a" if right else "b")
        applier.apply_pending(pid, refill=False)
        checked, agreed = _agreement(r, eng, pid, 3)
        if suspect_before_gold is None and not any(kinds["p-w3"]) and checked > 0 \
                and (agreed + 1) / (checked + 2) < 0.6:
            suspect_before_gold = (checked, agreed)
            # agreement alone makes a suspect, never a pause: no gold answered yet
            with session_scope(eng) as ses:
                w3 = ses.exec(select(Worker).where(Worker.project_id == pid,
                                                   Worker.seq == 3)).one()
                assert w3.status == "active"
                assert not ses.exec(select(PauseEvent)).all()
    # Then agreement made the careless annotator suspect before any gold answer of theirs
    assert suspect_before_gold is not None
    # and from then on most of what they got was gold, while the careful ones got little
    # (suspect only while a first label or two disagreed: the record clears)
    first = kinds["p-w3"].index(True)
    assert np.mean(kinds["p-w3"][first:]) > 0.7, kinds["p-w3"]
    careful = kinds["p-w0"] + kinds["p-w1"] + kinds["p-w2"]
    assert np.mean(careful) < 0.1, [np.flatnonzero(kinds[f"p-w{j}"]) for j in range(3)]
    # and the careful annotators' agreement records are clean
    for w in range(3):
        checked, agreed = _agreement(r, eng, pid, w)
        assert checked > 0 and (agreed + 1) / (checked + 2) >= 0.6  # not suspect
    # and the careless one was paused by the quality rule on gold, with its trail
    with session_scope(eng) as ses:
        w3 = ses.exec(select(Worker).where(Worker.project_id == pid, Worker.seq == 3)).one()
        events = ses.exec(select(PauseEvent)).all()
        golds = ses.exec(select(Label).where(Label.worker_id == w3.id,
                                             Label.is_gold == True)).all()  # noqa: E712
        assert w3.status == "paused" and len(events) == 1, (
            len(golds), sum(g.value == "a" for g in golds), "".join(".G"[k] for k in kinds["p-w3"]))
        e = events[0]
        assert e.worker_id == w3.id and e.rule == "quality"
        assert e.statistic == "likelihood_ratio" and e.bound == pytest.approx(100)
        assert e.value is not None and e.value >= 100
        assert e.gold_answered is not None and 8 <= e.gold_answered <= len(golds)
        assert e.gold_right is not None and e.gold_right < 0.6 * e.gold_answered
    with pytest.raises(Forbidden, match=r"paused by the quality rule after \d+ of \d+ gold "
                                         r"answers right; ask your operator"):
        s.next_assignment("p-w3")


def test_agreement_with_the_other_labels_from_sql(r, db_url):
    # Given a policy without a worker model (uniform) and labels on three tasks:
    #   t0: w0 a, w1 a, w2 b    t1: w0 a, w2 a    t2: w0 b (alone)
    eng, pid = make_project(db_url, n_tasks=3, workers=3, policy="uniform")
    with session_scope(eng) as ses:
        from labelq.record.models import Task
        ids = {t.seq: t.id for t in ses.exec(select(Task).where(Task.project_id == pid))}
        wid = {w.seq: w.id for w in ses.exec(select(Worker).where(Worker.project_id == pid))}
        for n, (t, w, v) in enumerate([(0, 0, "a"), (0, 1, "a"), (0, 2, "b"), (1, 0, "a"),
                                       (1, 2, "a"), (2, 0, "b")]):
            ses.add(Assignment(id=f"x{n}", project_id=pid, task_id=ids[t], worker_id=wid[w],
                               expires=utcnow(), state="submitted"))
            ses.flush()
            ses.add(Label(project_id=pid, task_id=ids[t], worker_id=wid[w], value=v,
                          assignment_id=f"x{n}"))
    hot = StateCache().get(eng, r, pid)
    with session_scope(eng) as ses:
        checked, right = agreement_counts(ses, hot, [0, 1, 2])
    # Then each label with others counts once, right by the share of the others equal to it:
    # w0: t0 1/2 + t1 1/1 (t2 alone: not checked); w1: t0 1/2; w2: t0 0/2 + t1 1/1
    assert checked.tolist() == [2, 1, 2]
    assert right.tolist() == pytest.approx([1.5, 0.5, 1.0])
