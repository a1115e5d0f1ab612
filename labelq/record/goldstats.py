"""Gold's SQL side: scores, the quality rule and the gold pool's exhaustion, from the record.

* :func:`gold_scores` turns the gold labels of some workers into
  :class:`labelq.gold.scoring.GoldScores` (per worker, per category Beta posteriors);
  :func:`project_gold_scores` does it for every worker of a project. Only answers to
  *random* gold count (kinds ``loaded`` and ``audit``:
  :func:`labelq.record.models.random_gold`): gold chosen for being disputed would score
  everyone below their accuracy. ``chosen=True`` reads the others instead (kinds
  ``suggested``, ``reviewed``): agreement with the expert on disputed tasks, shown apart.
  Only answers given *without* the model's suggestion shown count (issue 42,
  :func:`~labelq.record.models.unsuggested`): one given with it shown may be the model's
  answer, not the annotator's.
  ``shown=True`` reads those instead, reported apart (``gold_with_suggestion``).
* :func:`flagged` / :func:`apply_quality_rule`: the project's ``quality`` JSON is a
  :class:`labelq.gold.quality.QualityRule`; the applier runs it after each batch that had
  gold, and an *active* worker the rule flags is paused (status in SQL, which ``next``
  reads on every request), with its trail (:mod:`.pauses`).
* :func:`gold_exhaustion` tells which active workers have seen most of the gold pool
  (:class:`labelq.gold.pool.ExhaustionRule`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import case, func
from sqlmodel import Session, col, select

from ..gold.pool import ExhaustionRule
from .models import (
    Assignment,
    Label,
    Project,
    Task,
    Worker,
    chosen_gold,
    random_gold,
    unsuggested,
)
from .pauses import record_quality_pause

if TYPE_CHECKING:  # (imported where used: scoring imports scipy, which labelq status skips)
    from ..gold.scoring import GoldScores

__all__ = ["ProjectGold", "project_gold_scores", "gold_exhaustion", "gold_scores", "flagged",
           "apply_quality_rule"]


def gold_scores(session: Session, project_id: int, worker_seqs: list[int],
                categories: list[str], *, chosen: bool = False,
                shown: bool = False) -> GoldScores:
    """Scores of ``worker_seqs`` (rows in that order) over ``categories``, on their answers
    to random gold (``chosen``: to chosen gold instead) given without a suggestion shown
    (``shown``: only those given with one shown instead)."""
    from ..gold.scoring import GoldScores

    correct = func.sum(case((col(Label.value) == col(Task.gold_answer), 1), else_=0))
    q = (select(col(Worker.seq), col(Task.category), func.count(), correct)
         .join(Label, col(Label.worker_id) == col(Worker.id))
         .join(Task, col(Task.id) == col(Label.task_id))
         .where(col(Label.project_id) == project_id, col(Label.is_gold).is_(True),
                col(Worker.seq).in_(worker_seqs), chosen_gold() if chosen else random_gold(),
                ~unsuggested() if shown else unsuggested())
         .group_by(col(Worker.seq), col(Task.category)))
    row_of = {w: i for i, w in enumerate(worker_seqs)}
    col_of = {c: i for i, c in enumerate(categories)}
    scores = GoldScores.zeros(len(worker_seqs), max(len(categories), 1))
    for seq, cat, n, c in session.exec(q).all():
        scores.total[row_of[int(seq)], col_of.get(cat, 0)] += n
        scores.correct[row_of[int(seq)], col_of.get(cat, 0)] += int(c or 0)
    return scores


def flagged(session: Session, project: Project, worker_seqs: list[int],
            categories: list[str] | None = None,
            scores: GoldScores | None = None) -> list[int]:
    """Those of ``worker_seqs`` the project's quality rule flags on their gold scores in
    SQL now (none without a rule); ``scores``: those scores, already read."""
    if not project.quality or not worker_seqs:
        return []
    from ..gold.quality import QualityRule

    rule = QualityRule(**project.quality)
    if scores is None:
        assert project.id is not None, "a project read from the database has its id"
        scores = gold_scores(session, project.id, worker_seqs, categories or [""])
    return [worker_seqs[int(i)] for i in rule.workers_to_pause(scores)]


def apply_quality_rule(session: Session, project: Project, worker_seqs: list[int],
                       categories: list[str] | None = None,
                       scores: GoldScores | None = None) -> list[str]:
    """Pause the active workers among ``worker_seqs`` the rule flags; returns handles.
    ``scores``: their :func:`gold_scores`, if already read."""
    paused = []
    if project.quality and worker_seqs and scores is None:
        assert project.id is not None, "a project read from the database has its id"
        scores = gold_scores(session, project.id, worker_seqs, categories or [""])
    for seq in flagged(session, project, worker_seqs, categories, scores):
        w = session.exec(select(Worker).where(Worker.project_id == project.id,
                                              Worker.seq == seq)).one()
        if w.status == "active":
            w.status = "paused"
            session.add(w)
            paused.append(w.handle)
            assert scores is not None and project.quality  # (flagged found some)
            from ..gold.quality import QualityRule
            record_quality_pause(session, w, QualityRule(**project.quality), scores,
                                 worker_seqs.index(seq), categories or [""])
    return paused


@dataclass
class ProjectGold:
    scores: GoldScores  # (n_workers, n_categories) by worker seq: random gold
    categories: list[str]
    handles: list[str]
    # the same on chosen gold (agreement with the expert on disputed tasks), if read
    chosen: GoldScores | None = None
    # random gold answered with a model's suggestion shown (scores no one), if read
    shown: GoldScores | None = None


def project_gold_scores(session: Session, project: Project, *,
                        with_chosen: bool = False) -> ProjectGold:
    """Every worker's gold scores, by worker seq and task category (the applier's query);
    ``with_chosen``: their agreement on chosen gold too, and their random gold answered
    with a suggestion shown."""
    cats = sorted(set(session.exec(select(Task.category).where(Task.project_id == project.id)
                                   .distinct()))) or [""]
    handles = list(session.exec(select(Worker.handle).where(Worker.project_id == project.id)
                                .order_by(Worker.seq)))
    assert project.id is not None, "a project read from the database has its id"
    seqs = list(range(len(handles)))
    scores = gold_scores(session, project.id, seqs, cats)
    chosen = gold_scores(session, project.id, seqs, cats, chosen=True) if with_chosen else None
    shown = gold_scores(session, project.id, seqs, cats, shown=True) if with_chosen else None
    return ProjectGold(scores, cats, handles, chosen, shown)


def gold_exhaustion(session: Session, project: Project,
                    rule: ExhaustionRule = ExhaustionRule()) -> list[dict[str, str | int]]:
    """Active workers close to having seen the whole gold pool: handle, seen, pool size."""
    pool = session.exec(select(func.count()).select_from(Task)
                        .where(col(Task.project_id) == project.id,
                               col(Task.is_gold).is_(True))).one()
    if not project.gold_schedule:
        return []
    seen: dict[int, int] = {w: n for w, n in session.exec(
        select(col(Assignment.worker_id), func.count(func.distinct(col(Assignment.task_id))))
        .where(col(Assignment.project_id) == project.id, col(Assignment.is_gold).is_(True))
        .group_by(col(Assignment.worker_id)))}
    workers = session.exec(select(Worker).where(Worker.project_id == project.id,
                                                Worker.status == "active")).all()
    if not workers:
        return []
    n_seen = np.array([seen.get(w.id, 0) for w in workers])
    near = rule.near_exhaustion(np.full(len(workers), pool), n_seen)
    return [{"worker": w.handle, "gold_seen": int(n), "gold_pool": int(pool)}
            for w, n, flag in zip(workers, n_seen, np.atleast_1d(near), strict=True) if flag]
