"""Gold scoring and the quality rule, run by the applier after each batch that had gold.

Scores are :class:`labelq.gold.scoring.GoldScores` (Beta posterior per worker and
category) computed from SQL — the record — for the workers whose gold answers just arrived;
the project's ``quality`` JSON is a :class:`labelq.gold.quality.QualityRule`. An *active*
worker the rule flags is paused (status in SQL, which ``next`` reads on every request).
"""

from __future__ import annotations

from sqlalchemy import case, func
from sqlmodel import Session, select

from ..gold.quality import QualityRule
from ..gold.scoring import GoldScores
from ..models import Label, Project, Task, Worker

__all__ = ["gold_scores", "flagged", "apply_quality_rule"]


def gold_scores(session: Session, project_id: int, worker_seqs: list[int],
                categories: list[str]) -> GoldScores:
    """Scores of ``worker_seqs`` (rows in that order) over ``categories``."""
    correct = func.sum(case((Label.value == Task.gold_answer, 1), else_=0))
    q = (select(Worker.seq, Task.category, func.count(), correct)
         .join(Label, Label.worker_id == Worker.id).join(Task, Task.id == Label.task_id)
         .where(Label.project_id == project_id, Label.is_gold.is_(True),
                Worker.seq.in_(worker_seqs))
         .group_by(Worker.seq, Task.category))
    row_of = {w: i for i, w in enumerate(worker_seqs)}
    col_of = {c: i for i, c in enumerate(categories)}
    scores = GoldScores.zeros(len(worker_seqs), max(len(categories), 1))
    for seq, cat, n, c in session.exec(q).all():
        scores.total[row_of[int(seq)], col_of.get(cat, 0)] += n
        scores.correct[row_of[int(seq)], col_of.get(cat, 0)] += int(c or 0)
    return scores


def flagged(session: Session, project: Project, worker_seqs: list[int],
            categories: list[str] | None = None) -> list[int]:
    """Those of ``worker_seqs`` the project's quality rule flags on their gold scores in
    SQL now (none without a rule)."""
    if not project.quality or not worker_seqs:
        return []
    rule = QualityRule(**project.quality)
    scores = gold_scores(session, project.id, worker_seqs, categories or [""])
    return [worker_seqs[int(i)] for i in rule.workers_to_pause(scores)]


def apply_quality_rule(session: Session, project: Project, worker_seqs: list[int],
                       categories: list[str] | None = None) -> list[str]:
    """Pause the active workers among ``worker_seqs`` the rule flags; returns handles."""
    paused = []
    for seq in flagged(session, project, worker_seqs, categories):
        w = session.exec(select(Worker).where(Worker.project_id == project.id,
                                              Worker.seq == seq)).one()
        if w.status == "active":
            w.status = "paused"
            session.add(w)
            paused.append(w.handle)
    return paused
