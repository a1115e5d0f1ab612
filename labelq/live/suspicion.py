"""Agreement evidence for gold on suspicion (issue 41): the applier's side.

A gold schedule with ``suspect=r`` raises a worker's gold rate to ``r`` while the worker is
suspect (:func:`labelq.gold.schedules.suspected`): on the gold record, and on the agreement
record this module computes — how many of the worker's labels could be checked against
other evidence, and how many of them were judged right (soft counts):

* a policy with a worker model says it (``worker_agreement(state)``: ``auto``'s per-worker
  soft counts, which its fit calibrates against gold);
* otherwise, from SQL: each gold answer counts once, right if it is the known answer (as
  in ``auto``'s counts), and each of the worker's other labels on a task with other labels
  counts once, right by the share of those other labels that equal it. Against peers of
  mean accuracy q (two classes) a worker of accuracy a agrees at a·q + (1 − a)(1 − q) < a,
  so this record suspects more readily than the worker model does: it costs gold, never a
  pause; and a suspect who answers their gold right clears it, even at a suspect rate of 1
  (no task labels meanwhile).

The applier writes the records of the workers of each batch to ``nissued`` (``aa{w}`` /
``ar{w}``, :func:`..redis.keys.agreement_records`), where the decision reads them with the
gold record. A worker who has just become suspect has their inbox's held reservations
released (:func:`release_held`): they were decided at the low rate, and at a script's pace
an inbox holds half a second of work.

Agreement never pauses anyone: the quality rule reads gold answers only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import and_, case, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from ..gold.schedules import FixedRate, OnboardingDecay, WorkerHistory, suspected
from ..record.goldstats import gold_scores
from ..record.models import Label, Worker
from .goldplan import schedule_for
from .hotstate import Hot
from .redis.keys import Keys, agreement_fields, gold_record_fields
from .redis.scripts import Released, Scripts
from .redis.wire import text

__all__ = ["suspect_schedule", "agreement_counts", "suspects", "release_held"]


def suspect_schedule(spec: str | None) -> FixedRate | OnboardingDecay | None:
    """The project's schedule if it raises the gold rate on suspicion, else ``None``."""
    schedule = schedule_for(spec)
    if isinstance(schedule, (FixedRate, OnboardingDecay)) and schedule.suspect > 0:
        return schedule
    return None


def agreement_counts(session: Session, hot: Hot,
                     workers: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(checked, right) of ``workers`` (seqs), float arrays in that order (module doc)."""
    ws = np.asarray(workers, dtype=np.int64)
    own = getattr(hot.policy, "worker_agreement", None)
    if own is not None:
        checked, right = own(hot.state)
        return np.asarray(checked, float)[ws], np.asarray(right, float)[ws]
    other = aliased(Label)
    same = func.sum(case((col(other.value) == col(Label.value), 1), else_=0))
    q = (select(col(Worker.seq), col(Label.id), same, func.count(col(other.id)))
         .join(Worker, col(Worker.id) == col(Label.worker_id))
         .join(other, and_(col(other.task_id) == col(Label.task_id),
                           col(other.id) != col(Label.id)))
         .where(col(Label.project_id) == hot.project_id, col(Label.is_gold).is_(False),
                col(Worker.seq).in_([int(w) for w in ws]))
         .group_by(col(Worker.seq), col(Label.id)))
    row = {int(w): i for i, w in enumerate(ws)}
    checked, right = np.zeros(ws.size), np.zeros(ws.size)
    for seq, _lid, agree, n in session.exec(q).all():
        checked[row[int(seq)]] += 1
        right[row[int(seq)]] += int(agree or 0) / int(n)
    gold = gold_scores(session, hot.project_id, [int(w) for w in ws], [""])
    return checked + gold.total.sum(axis=1), right + gold.correct.sum(axis=1)


def suspects(redis: Any, k: Keys, schedule: FixedRate | OnboardingDecay,
             workers: Sequence[int]) -> set[int]:
    """Those of ``workers`` the hot state's records make suspect now (one HMGET)."""
    if not workers:
        return set()
    names = [f for w in workers for f in (*gold_record_fields(w), *agreement_fields(w))]
    values = redis.hmget(k.nissued, names)
    out = set()
    for i, w in enumerate(workers):
        ga, gr, aa, ar = values[4 * i:4 * i + 4]
        answered, checked = int(ga or 0), float(aa or 0)
        history = WorkerHistory(gold_answered=answered,
                                gold_correct=min(int(gr or 0), answered),
                                agree_answered=checked,
                                agree_correct=min(float(ar or 0), checked))
        if suspected(history, schedule.suspect_below):
            out.add(int(w))
    return out


def release_held(redis: Any, scripts: Scripts, k: Keys, worker: int) -> int:
    """Release the reservations still held in ``worker``'s inbox (never popped: the worker
    was never given them) and take them off the inbox, so the refill tops it up with
    decisions made on the new record; how many. One the worker pops meanwhile is refused
    by ``RELEASE`` (``held_only``) and is gone from the list already."""
    n = 0
    for a in {text(x) for x in redis.lrange(k.inbox(worker), 0, -1)}:
        if isinstance(scripts.release(k, a, worker=worker, held_only=True), Released):
            redis.lrem(k.inbox(worker), 0, a)
            n += 1
    return n
