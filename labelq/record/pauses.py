"""Every pause leaves a trail (issue 41): when, by which rule, on what evidence.

A :class:`~labelq.record.models.PauseEvent` row is written in the transaction that pauses:

* :func:`record_quality_pause` — the project's quality rule paused the annotator (the
  applier after gold answers, ``labelq gold mark``): their gold answers right and answered
  when it fired, and the test's statistic with its value and the bound it crossed (the
  sequential rule: the likelihood ratio of "accuracy below the threshold" against "at the
  threshold", bound 1 / (1 − confidence); the posterior rule: P(accuracy < threshold),
  bound ``confidence``); with ``per_category`` the category whose evidence is strongest;
* :func:`record_operator_pause` — an operator paused them (``labelq workers pause``, the
  API's and the dashboard's status change): rule ``operator``, no evidence.

:func:`pause_trail` is the trail as every surface shows it (``labelq workers list/show``,
the dashboard, ``/me/progress``, the forbidden answer to ``next``, the log): a dict whose ``text``
says it in words, e.g. "paused by the quality rule after 9 of 24 gold answers right; ask
your operator". :func:`last_pauses` reads the latest pause of each paused annotator.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import func
from sqlmodel import Session, col, select

from .models import PauseEvent, Worker, as_utc

if TYPE_CHECKING:
    from ..gold.quality import QualityRule
    from ..gold.scoring import GoldScores

__all__ = ["record_quality_pause", "record_operator_pause", "pause_trail", "pause_text",
           "last_pauses", "worker_pauses"]

log = logging.getLogger(__name__)


def record_quality_pause(session: Session, worker: Worker, rule: QualityRule,
                         scores: GoldScores, row: int, categories: list[str]) -> PauseEvent:
    """Add the trail of the quality rule's pause of ``worker`` (row ``row`` of ``scores``,
    whose columns are ``categories``) to the session."""
    pooled = not rule.per_category
    if rule.rule == "sequential":
        statistic, bound = "likelihood_ratio", 1.0 / (1.0 - rule.confidence)
        values = np.exp(np.atleast_1d(scores.log_evidence_below(rule.threshold, pooled)[row]))
    else:
        statistic, bound = "prob_below", rule.confidence
        values = np.atleast_1d(scores.prob_below(rule.threshold, pooled)[row])
    k = int(np.argmax(values))
    if pooled:
        right, answered = scores.correct[row].sum(), scores.total[row].sum()
        category = None
    else:
        right, answered = scores.correct[row, k], scores.total[row, k]
        category = categories[k] if k < len(categories) else None
    value = float(values[k])
    event = PauseEvent(project_id=worker.project_id, worker_id=_id(worker), rule="quality",
                       gold_right=int(right), gold_answered=int(answered),
                       statistic=statistic, value=value if math.isfinite(value) else None,
                       bound=bound, category=category)
    session.add(event)
    log.info("project %s: %s %s (%s %.4g, bound %.4g)", worker.project_id, worker.handle,
             pause_text(event), statistic, value, bound)
    _announce(session, worker, event)
    return event


def record_operator_pause(session: Session, worker: Worker) -> PauseEvent:
    """Add the trail of an operator's pause of ``worker`` to the session."""
    event = PauseEvent(project_id=worker.project_id, worker_id=_id(worker), rule="operator")
    session.add(event)
    log.info("project %s: %s %s", worker.project_id, worker.handle, pause_text(event))
    _announce(session, worker, event)
    return event


def _announce(session: Session, worker: Worker, event: PauseEvent) -> None:
    """The webhooks' ``annotator.paused`` event, in the pause's transaction (the outbox:
    :mod:`labelq.record.hooks`)."""
    from .hooks import emit
    emit(session, worker.project_id, "annotator.paused",
         {"worker": worker.handle, **pause_trail(event)})


def _id(worker: Worker) -> int:
    assert worker.id is not None, "a worker read from the database has its id"
    return worker.id


def pause_text(event: PauseEvent) -> str:
    """The pause in words, for the annotator and the operator."""
    if event.rule == "quality":
        where = f" in category {event.category!r}" if event.category else ""
        return (f"paused by the quality rule after {event.gold_right} of "
                f"{event.gold_answered} gold answers right{where}; ask your operator")
    return "paused by the operator; ask your operator"


def pause_trail(event: PauseEvent) -> dict[str, Any]:
    """The trail as the CLI, the API and the dashboard show it."""
    return {"at": as_utc(event.at).isoformat(), "rule": event.rule,
            "gold_right": event.gold_right, "gold_answered": event.gold_answered,
            "statistic": event.statistic,
            "value": None if event.value is None else round(event.value, 4),
            "bound": None if event.bound is None else round(event.bound, 4),
            "category": event.category, "text": pause_text(event)}


def last_pauses(session: Session, worker_ids: list[int]) -> dict[int, PauseEvent]:
    """worker id -> the latest pause of those of ``worker_ids`` that are paused now."""
    if not worker_ids:
        return {}
    latest = (select(col(PauseEvent.worker_id), func.max(col(PauseEvent.id)).label("last"))
              .join(Worker, col(Worker.id) == col(PauseEvent.worker_id))
              .where(col(PauseEvent.worker_id).in_(worker_ids), col(Worker.status) == "paused")
              .group_by(col(PauseEvent.worker_id)).subquery())
    rows = session.exec(select(PauseEvent).join(latest, col(PauseEvent.id) == latest.c.last))
    return {e.worker_id: e for e in rows.all()}


def worker_pauses(session: Session, worker: Worker) -> list[PauseEvent]:
    """Every pause of ``worker``, oldest first."""
    return list(session.exec(select(PauseEvent).where(PauseEvent.worker_id == _id(worker))
                             .order_by(col(PauseEvent.id))).all())
