"""Gold scoring and the quality rule, run by the applier after each batch.

A worker's gold score is Beta(1 + correct, 1 + wrong) over their gold answers in SQL (the
record, so the score never drifts from what was submitted). The project's ``quality`` JSON
``{"min_accuracy": 0.7, "min_gold": 5}`` pauses an *active* worker once they answered at
least ``min_gold`` gold questions and the posterior mean accuracy is below ``min_accuracy``.
No ``min_accuracy`` means no rule.
"""

from __future__ import annotations

from sqlalchemy import case, func
from sqlmodel import Session, select

from ..models import Label, Project, Task, Worker

__all__ = ["gold_scores", "apply_quality_rule"]


def gold_scores(session: Session, project_id: int,
                worker_seqs: list[int] | None = None) -> dict[int, tuple[int, int]]:
    """worker seq -> (gold answered, gold correct)."""
    correct = func.sum(case((Label.value == Task.gold_answer, 1), else_=0))
    q = (select(Worker.seq, func.count(), correct)
         .join(Label, Label.worker_id == Worker.id).join(Task, Task.id == Label.task_id)
         .where(Label.project_id == project_id, Label.is_gold.is_(True)).group_by(Worker.seq))
    if worker_seqs is not None:
        q = q.where(Worker.seq.in_(worker_seqs))
    return {int(s): (int(n), int(c or 0)) for s, n, c in session.exec(q).all()}


def apply_quality_rule(session: Session, project: Project, worker_seqs: list[int]) -> list[str]:
    """Pause the active workers among ``worker_seqs`` failing the rule; returns handles."""
    rule = project.quality or {}
    min_acc = rule.get("min_accuracy")
    if min_acc is None or not worker_seqs:
        return []
    min_gold = int(rule.get("min_gold", 5))
    paused = []
    for seq, (n, c) in gold_scores(session, project.id, worker_seqs).items():
        if n >= min_gold and (1 + c) / (2 + n) < float(min_acc):
            w = session.exec(select(Worker).where(Worker.project_id == project.id,
                                                  Worker.seq == seq)).one()
            if w.status == "active":
                w.status = "paused"
                session.add(w)
                paused.append(w.handle)
    return paused
