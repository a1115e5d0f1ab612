"""Issue 42: gold answered with the model's suggestion shown scores no one. With
``show_suggestions`` on, a quarter of the assignments — gold and tasks alike — show none
(labelq.record.withheld); the quality rule, the gold records and every gold accuracy shown
read only the gold answered without one, and the others are reported apart. Through the
real service (Redis, submit path) and the applier, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
from sqlmodel import col, select

from labelq.dashboard import worker_gold
from labelq.exporting import aggregate_project, agreement_report, load_project_labels
from labelq.gold.quality import QualityRule
from labelq.gold.scoring import GoldScores
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache
from labelq.record.db import session_scope
from labelq.record.models import Label, Project, Task, Worker
from labelq.record.predictions import load_predictions
from labelq.record.projects import get_project
from labelq.record.settings import Settings
from labelq.record.withheld import withheld
from labelq.service import Service

from .conftest import make_project

RULE = {"threshold": 0.6, "min_gold": 8, "confidence": 0.99, "rule": "sequential"}
N_TASKS, N_GOLD = 20, 120


def _model(i: int, gold: bool) -> str:
    """The model's answer: on gold (answer ``a``) right but on every fifth; ``a`` on
    even tasks."""
    if gold:
        return "b" if i % 5 == 4 else "a"
    return "ab"[i % 2]


def test_a_copier_of_the_suggestion_is_paused_on_the_gold_it_answered_alone(
        r, redis_url, db_url, tmp_path):
    # Given a project showing suggestions, a model that predicts every task and gold
    # question (right on 80 % of the gold), a quality rule, and gold on most assignments
    eng, pid = make_project(db_url, n_tasks=N_TASKS, n_gold=N_GOLD, workers=2,
                            max_labels=2, gold_schedule="fixed:rate=0.9", quality=RULE)
    rows = ["id,p_a,p_b"] + [
        f"{t}{i},{0.9 if _model(i, t == 'g') == 'a' else 0.1},"
        f"{0.1 if _model(i, t == 'g') == 'a' else 0.9}"
        for t, n in (("t", N_TASKS), ("g", N_GOLD)) for i in range(n)]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    with session_scope(eng) as s:
        load_predictions(s, get_project(s, "p"), tmp_path / "m.csv", model="m")
        s.get(Project, pid).show_suggestions = True
        project = get_project(s, "p")
        ids = {w.handle: w.id for w in s.exec(select(Worker).where(Worker.project_id == pid))}
    service = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    # When p-w0 copies the suggestion whenever one is shown and answers b (wrong on
    # gold) when none is, and p-w1 answers a (right on gold) but on every tenth label
    rng = np.random.default_rng(0)
    for step in range(120):
        h = f"p-w{step % 2}"
        a = service.next_assignment(h)
        if a is None:
            continue
        shown = service.suggestion(project, a.task_seq, ids[h])  # as the API shows it
        if h == "p-w0":
            answer = shown if shown is not None else "b"
        else:
            answer = "b" if rng.random() < 0.1 else "a"
        service.submit(h, a.assignment_id, answer)
    Applier(eng, r, cache=StateCache()).apply_pending(pid, refill=False)
    with session_scope(eng) as s:
        gold = s.exec(select(Label.worker_id, Label.task_id, Label.value, Label.suggested)
                      .join(Task, col(Task.id) == col(Label.task_id))
                      .where(Label.project_id == pid, col(Label.is_gold).is_(True))).all()
        status = {w.handle: w.status for w in s.exec(select(Worker)
                                                      .where(Worker.project_id == pid))}
        summary = worker_gold(s, s.get(Project, pid))
        pl = load_project_labels(s, s.get(Project, pid))
        exported = {w["worker"]: w for w in agreement_report(
            pl, aggregate_project(s, s.get(Project, pid), pl, "mv"))["workers"]}
    copier = [(t, v, m) for w, t, v, m in gold if w == ids["p-w0"]]
    alone = [(t, v) for t, v, m in copier if not m]
    # Then each gold answer is marked as the page showed it: unmarked exactly on the
    # assignments withheld
    assert all(m is not withheld(ids["p-w0"], t) for t, _v, m in copier)
    assert 8 <= len(alone) < len(copier)
    # and the copier is paused on the gold it answered alone (all wrong), the other not
    assert status == {"p-w0": "paused", "p-w1": "active"}
    assert summary["p-w0"]["gold"] == len(alone)
    assert summary["p-w0"]["gold_correct"] == sum(v == "a" for _t, v in alone) == 0
    # (the export's per-annotator gold accuracy, and the dashboard's table, read the same)
    assert (exported["p-w0"]["gold_n"], exported["p-w0"]["gold_accuracy"]) == (len(alone), 0)
    assert exported["p-w1"]["gold_n"] == summary["p-w1"]["gold"]
    # and its answers with the suggestion shown are reported apart: right where the model
    # was (4 in 5), scoring no one
    apart = [v for _t, v, m in copier if m]
    assert summary["p-w0"]["gold_with_suggestion"] == len(apart)
    assert summary["p-w0"]["gold_with_suggestion_correct"] == sum(v == "a" for v in apart)
    # while scored on every gold answer, as before, the rule would not have paused it
    everything = GoldScores(np.array([[sum(v == "a" for _t, v, _m in copier)]], float),
                            np.array([[len(copier)]], float))
    assert not QualityRule(**RULE).pause_mask(everything)[0]
    assert summary["p-w1"]["gold"] + summary["p-w1"]["gold_with_suggestion"] \
        == sum(w == ids["p-w1"] for w, *_ in gold)
