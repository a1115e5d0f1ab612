"""Which tasks were drawn for an expert's answer, and how (``gold_draw``).

* :func:`audit_draw` is ``labelq gold audit``: a uniform random sample of the project's
  labelled, non-gold tasks not drawn by an earlier audit, stratified by category with
  proportional allocation and randomised rounding (:func:`proportional_allocation`), so
  that every such task has the same chance ``n / N`` of being drawn. Marked, their answers
  are of kind ``audit``: a random sample, which scores annotators.
* :func:`record_draw` writes a draw (an audit's, or the tasks ``labelq gold suggest``
  listed: kind ``suggested``); :func:`draw_kinds` reads, for ``labelq gold mark``, which
  of some tasks were drawn how (:func:`mark_kind` gives a marked task its kind).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import exists, func
from sqlmodel import Session, col, select

from ..errors import InputError
from .models import GoldDraw, Label, Project, Task, utcnow

__all__ = ["AuditDraw", "audit_draw", "proportional_allocation", "record_draw", "draw_kinds",
           "mark_kind", "audit_count", "AUDIT_STRATIFICATION"]

_IN_CHUNK = 5000  # ids per IN (...) list

#: how an audit is stratified, in the words ``labelq gold audit`` prints
AUDIT_STRATIFICATION = ("stratified by category, proportional allocation with randomised "
                        "rounding: every labelled task not gold and not drawn before had "
                        "the same chance of being drawn")


@dataclass(frozen=True)
class AuditDraw:
    """What :func:`audit_draw` drew: ``tasks`` (in random order), the draw's name,
    ``eligible`` (N: the tasks it drew from) and, per category, (eligible, drawn)."""

    tasks: list[Task]
    draw: str
    eligible: int
    by_category: dict[str, tuple[int, int]]

    @property
    def inclusion(self) -> float:
        """Each eligible task's chance of being drawn (``n / N``)."""
        return len(self.tasks) / self.eligible if self.eligible else 0.0


def proportional_allocation(sizes: Sequence[int], n: int, rng: np.random.Generator
                            ) -> np.ndarray:
    """How many of ``n`` to draw from each stratum of ``sizes`` (N in all, n <= N): the
    stratum's share n·N_c/N rounded down or up at random (systematic rounding of the
    cumulated shares from one uniform start), so that the counts sum to n, each is
    ⌊n·N_c/N⌋ or ⌈n·N_c/N⌉ (at most N_c) and its expectation is exactly n·N_c/N: a task's
    chance of being drawn, E[n_c]/N_c, is n/N in every stratum."""
    size = np.asarray(sizes, dtype=np.int64)
    total = int(size.sum())
    if not 0 <= n <= total:
        raise ValueError(f"n must be in [0, {total}], got {n}")
    if n == total:
        whole: np.ndarray = size.copy()
        return whole
    cum = np.concatenate([[0.0], np.cumsum(size * (n / total))])
    cum[-1] = n  # (no rounding error at the end: the counts sum to n)
    u = rng.random()
    # points u, u + 1, ..., u + n - 1: how many fall in each stratum's [cum_c, cum_c+1)
    hits = np.ceil(cum - u).astype(np.int64)
    out: np.ndarray = np.minimum(np.diff(hits), size)
    return out


def audit_draw(session: Session, project: Project, n: int, rng: np.random.Generator
               ) -> AuditDraw:
    """Draw an audit of ``n`` tasks of ``project`` (all of them if fewer are eligible) and
    record it (kind ``audit``) in the caller's transaction; see the module docstring."""
    if n < 1:
        raise InputError(f"--n must be at least 1, got {n}", field="n")
    labelled = exists().where(col(Label.task_id) == col(Task.id))
    drawn = exists().where(col(GoldDraw.task_id) == col(Task.id), col(GoldDraw.kind) == "audit")
    rows = session.exec(select(col(Task.id), col(Task.category))
                        .where(col(Task.project_id) == project.id, col(Task.is_gold).is_(False),
                               labelled, ~drawn)
                        .order_by(col(Task.id))).all()
    by_cat: dict[str, list[int]] = {}
    for tid, cat in rows:
        by_cat.setdefault(str(cat), []).append(int(tid))
    cats = sorted(by_cat)
    sizes = [len(by_cat[c]) for c in cats]
    k = min(n, len(rows))
    counts = proportional_allocation(sizes, k, rng) if rows else np.zeros(0, np.int64)
    picked: list[int] = []
    for c, m in zip(cats, counts, strict=True):
        if m:
            picked.extend(int(t) for t in rng.choice(by_cat[c], size=int(m), replace=False))
    picked = [picked[i] for i in rng.permutation(len(picked))]
    now = utcnow()
    draw = f"audit {now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
    tasks = _tasks(session, picked)
    record_draw(session, project, picked, "audit", draw)
    return AuditDraw(tasks, draw, len(rows),
                     {c: (s, int(m)) for c, s, m in zip(cats, sizes, counts, strict=True)})


def _tasks(session: Session, ids: list[int]) -> list[Task]:
    found: dict[int, Task] = {}
    for i in range(0, len(ids), _IN_CHUNK):
        found.update((int(t.id or 0), t) for t in session.exec(
            select(Task).where(col(Task.id).in_(ids[i:i + _IN_CHUNK]))))
    return [found[t] for t in ids]


def record_draw(session: Session, project: Project, task_ids: Sequence[int], kind: str,
                draw: str) -> int:
    """Record that ``task_ids`` were drawn as ``kind`` (``audit``, ``suggested``) by
    ``draw``; a task already drawn as that kind keeps its first draw. Returns how many
    were new."""
    have: set[int] = set()
    ids = list(dict.fromkeys(int(t) for t in task_ids))
    for i in range(0, len(ids), _IN_CHUNK):
        have.update(int(t) for t in session.exec(
            select(col(GoldDraw.task_id)).where(col(GoldDraw.kind) == kind,
                                                col(GoldDraw.task_id).in_(ids[i:i + _IN_CHUNK]))))
    new = [t for t in ids if t not in have]
    now = utcnow()
    for t in new:
        session.add(GoldDraw(project_id=int(project.id or 0), task_id=t, kind=kind, draw=draw,
                             drawn=now))
    session.flush()
    return len(new)


def draw_kinds(session: Session, task_ids: Sequence[int]) -> dict[int, set[str]]:
    """task id -> the kinds it was drawn as (tasks never drawn are absent)."""
    out: dict[int, set[str]] = {}
    ids = list(dict.fromkeys(int(t) for t in task_ids))
    for i in range(0, len(ids), _IN_CHUNK):
        for tid, kind in session.exec(select(col(GoldDraw.task_id), col(GoldDraw.kind))
                                      .where(col(GoldDraw.task_id).in_(ids[i:i + _IN_CHUNK]))):
            out.setdefault(int(tid), set()).add(str(kind))
    return out


def mark_kind(drawn: set[str] | None) -> str:
    """The kind of a marked task drawn as ``drawn`` when the operator does not say: audit
    if an audit drew it, suggested if ``gold suggest`` listed it, else reviewed."""
    drawn = drawn or set()
    return "audit" if "audit" in drawn else "suggested" if "suggested" in drawn else "reviewed"


def audit_count(session: Session, project: Project) -> dict[str, Any]:
    """How many tasks audits drew, and how many of them are marked (answered) now."""
    drawn = session.exec(select(func.count()).select_from(GoldDraw)
                         .where(col(GoldDraw.project_id) == project.id,
                                col(GoldDraw.kind) == "audit")).one()
    answered = session.exec(select(func.count()).select_from(GoldDraw)
                            .join(Task, col(Task.id) == col(GoldDraw.task_id))
                            .where(col(GoldDraw.project_id) == project.id,
                                   col(GoldDraw.kind) == "audit",
                                   col(Task.is_gold).is_(True))).one()
    return {"drawn": int(drawn), "answered": int(answered)}
