"""Gold questions in a simulation, served as a live project serves them.

``labelq simulate --gold AMOUNT [--gold-schedule SPEC] [--quality SPEC]``:

* :func:`parse_gold_amount` reads ``--gold``: a share in (0, 1) of the tasks that have a
  truth, or an integer count >= 1.
* :func:`with_gold` marks a seeded sample of the tasks with a truth (and not gold already)
  as gold. The experiment draws it from the run's *environment* generator, after the
  environment (and its shuffle), so every policy of a run gets the same gold.
* :class:`GoldRules` is what the runner needs to serve it: the project's gold schedule
  (:func:`labelq.gold.schedules.schedule_from_spec`, the specs of ``labelq project create
  --gold-schedule``) and optionally the quality rule (:class:`labelq.gold.quality.QualityRule`,
  the syntax of ``project create --quality``, validated by
  :func:`labelq.record.projects.parse_quality`).

How the runner serves gold (:func:`labelq.simulate.runner.run_policy`, as
:mod:`labelq.live.decide` and :mod:`labelq.live.goldplan` do live): gold tasks are not in the
policy's own choice (live, they are never in ``pending``). When a worker is about to be given
a task — in push mode the worker of the pair the policy picked, in pull mode the arriving
worker — the schedule is asked with the worker's history (labels given, gold among them and
per category, gold answered and right). If gold is due, the policy's ``select_task`` picks
among the gold questions the worker has not seen (of the categories the schedule allows; in
a replay only those the worker labelled in the data, each label once); if there is none, or
the policy picks none, the worker gets the ordinary task. A gold answer is charged at the
worker's cost, reaches ``update`` with ``gold=True`` and the truth, and with a quality rule
the worker's gold record is judged at once: a paused worker gets nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError, LabelqError
from ..gold.quality import QualityRule
from ..gold.schedules import Schedule, schedule_from_spec
from .environment import Environment

__all__ = ["GoldRules", "DEFAULT_SCHEDULE", "parse_gold_amount", "parse_schedule",
           "parse_quality_rule", "n_gold", "with_gold"]

DEFAULT_SCHEDULE = "fixed:rate=0.1"


def parse_gold_amount(text: str | float | int) -> float | int:
    """``--gold``: a float in (0, 1) is a share of the tasks with a truth, an integer >= 1 a
    count; anything else is an :class:`InputError` naming the option."""
    raw = str(text).strip()
    try:
        count = int(raw)
    except ValueError:
        count = None
    if count is not None:
        if count < 1:
            raise InputError(f"--gold: need a share in (0, 1) or a count >= 1 of gold "
                             f"questions, got {raw!r}", field="gold")
        return count
    try:
        share = float(raw)
    except ValueError:
        share = float("nan")
    if not 0 < share < 1:
        raise InputError(f"--gold: need a share in (0, 1) or a count >= 1 (an integer) of "
                         f"gold questions, got {raw!r}", field="gold")
    return share


def parse_schedule(spec: str) -> Schedule | None:
    """``--gold-schedule``: :func:`schedule_from_spec`; ``none`` gives ``None`` (gold held
    out of the accuracy but never served). Errors are :class:`InputError` naming the option."""
    if spec.strip() == "none":
        return None
    try:
        return schedule_from_spec(spec)
    except LabelqError as exc:
        raise InputError(f"--gold-schedule: {exc}", field="gold_schedule") from exc


def parse_quality_rule(spec: str | None) -> QualityRule | None:
    """``--quality``: ``threshold=0.7,min_gold=10[,...]`` as ``project create --quality``."""
    if not spec:
        return None
    from ..record.projects import parse_quality
    try:
        return QualityRule(**parse_quality(spec))
    except LabelqError as exc:
        raise InputError(f"--quality: {exc}", field="quality") from exc


def n_gold(amount: float | int, candidates: int) -> int:
    """How many of ``candidates`` tasks (with a truth, not gold yet) ``amount`` makes gold:
    a share is rounded (at least one); a count must leave a task to score."""
    n = amount if isinstance(amount, int) else max(1, int(round(amount * candidates)))
    if n >= candidates:
        raise InputError(f"--gold {amount}: {n} gold questions, but only {candidates} "
                         f"tasks have a truth and are not gold (some must be left to "
                         f"score the policies on)", field="gold")
    return n


def with_gold(env: Environment, amount: float | int, rng: np.random.Generator) -> Environment:
    """``env`` with a sample of its tasks with a truth (not gold already) made gold."""
    assert env.is_gold is not None
    candidates = np.flatnonzero((env.truth >= 0) & ~env.is_gold)
    chosen = rng.choice(candidates, size=n_gold(amount, candidates.size), replace=False)
    is_gold = env.is_gold.copy()
    is_gold[chosen] = True
    return replace(env, is_gold=is_gold)


@dataclass(frozen=True)
class GoldRules:
    """Gold served by a schedule, judged by an optional quality rule (see module doc)."""

    schedule: Schedule | None
    quality: QualityRule | None = None

    @classmethod
    def parse(cls, schedule: str | None, quality: str | None) -> GoldRules:
        return cls(parse_schedule(schedule or DEFAULT_SCHEDULE), parse_quality_rule(quality))
