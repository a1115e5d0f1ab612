"""Gold statistics of a project from the durable record (the SQL edge of ``labelq.gold``).

``project_gold_scores`` turns the gold labels into :class:`labelq.gold.scoring.GoldScores`
(per worker, per category Beta posteriors); ``gold_exhaustion`` tells which active workers
have seen most of the gold pool (:class:`labelq.gold.pool.ExhaustionRule`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import func
from sqlmodel import Session, select

from .gold.pool import ExhaustionRule
from .gold.scoring import GoldScores
from .models import Assignment, Project, Task, Worker
from .queue.quality import gold_scores

__all__ = ["ProjectGold", "project_gold_scores", "gold_exhaustion"]


@dataclass
class ProjectGold:
    scores: GoldScores  # (n_workers, n_categories) by worker seq
    categories: list[str]
    handles: list[str]


def project_gold_scores(session: Session, project: Project) -> ProjectGold:
    """Every worker's gold scores, by worker seq and task category (the applier's query)."""
    cats = sorted(set(session.exec(select(Task.category).where(Task.project_id == project.id)
                                   .distinct()))) or [""]
    handles = list(session.exec(select(Worker.handle).where(Worker.project_id == project.id)
                                .order_by(Worker.seq)))
    scores = gold_scores(session, project.id, list(range(len(handles))), cats)
    return ProjectGold(scores, cats, handles)


def gold_exhaustion(session: Session, project: Project,
                    rule: ExhaustionRule = ExhaustionRule()) -> list[dict]:
    """Active workers close to having seen the whole gold pool: handle, seen, pool size."""
    pool = session.exec(select(func.count()).select_from(Task)
                        .where(Task.project_id == project.id, Task.is_gold.is_(True))).one()
    if not project.gold_schedule:
        return []
    seen = dict(session.exec(
        select(Assignment.worker_id, func.count(func.distinct(Assignment.task_id)))
        .where(Assignment.project_id == project.id, Assignment.is_gold.is_(True))
        .group_by(Assignment.worker_id)).all())
    workers = session.exec(select(Worker).where(Worker.project_id == project.id,
                                                Worker.status == "active")).all()
    if not workers:
        return []
    n_seen = np.array([seen.get(w.id, 0) for w in workers])
    near = rule.near_exhaustion(np.full(len(workers), pool), n_seen)
    return [{"worker": w.handle, "gold_seen": int(n), "gold_pool": int(pool)}
            for w, n, flag in zip(workers, n_seen, np.atleast_1d(near)) if flag]
