"""When to give a worker a gold question: injection schedules, independent of the policy.

Interface. A schedule is a small frozen, validated object with one pure decision::

    schedule.should_inject(history, rng) -> bool       # is the worker's next task gold?
    schedule.gold_categories(history) -> bool array | None   # which categories may it be from

``history`` is a :class:`WorkerHistory`: how many tasks the worker has answered (gold
included) and how many of them were gold, optionally per category. Declined tasks are not
counted. ``rng`` is a ``numpy.random.Generator``; deterministic schedules ignore it. The live
pipeline calls ``should_inject`` when a worker asks for work; when it says yes it picks a gold
task with :func:`labelq.gold.pool.pick_unseen_gold` among ``gold_categories``.

Schedules (spec text in brackets, parsed by :func:`schedule_from_spec`):

* :class:`NoGold` (``none``) — never.
* :class:`FixedRate` (``fixed:rate=0.1``) — each task is gold with probability ``rate``.
* :class:`OnboardingDecay` (``onboarding:n=5,rate=0.2,half_life=200,floor=0.02``) — the first
  ``n`` tasks are gold; after that the rate is ``max(floor, rate · 2^(−(t − n)/half_life))``
  where t is the number of tasks answered.
* :class:`Epochs` (``epochs:alpha=0.1,gamma=2``) — Kang & Tay's GR schedule: epoch r is one
  gold then τ(r) − τ(r−1) tasks, τ(r) = ⌈α r^γ⌉. With g golds answered, the next task is gold
  once the worker has answered τ(g) non-gold tasks; deterministic, about √(t/α) golds in t.
* :class:`PerCategory` (``per-category:s=3``) — the primal-dual rule (Ho, Jabbari & Vaughan
  2013): ``s`` gold questions of every category as soon as a worker arrives, then none. Needs
  ``history.gold_by_category``.

Gold on suspicion (``fixed`` and ``onboarding``; not the papers' ``epochs`` and
``per-category``): with ``suspect=r`` (default 0: off), a worker whose gold record so far
is suspect — the posterior mean of their gold accuracy under a uniform prior, (c + 1) /
(n + 2) for c right of n judged, below ``suspect_below`` (default 0.7) — gets gold at rate
at least r until the record clears. A careless annotator then answers gold fast enough for
a quality rule to reach its confidence (docs/gold.md, "Gold on suspicion"); a good one who
starts with a wrong answer or two pays a few extra gold questions. ``history.gold_answered``
and ``history.gold_correct`` carry the record (the live pipeline keeps them in Redis).

Agreement evidence makes a suspect too (issue 41): ``history.agree_answered`` and
``history.agree_correct`` are the worker's labels the project's worker model could check
against other labels and its (soft) count of right ones — for ``auto``, its per-worker soft
counts; for other policies, agreement with the other labels of the same tasks — and a worker
whose agreement record's posterior mean (c + 1) / (n + 2) is below ``suspect_below`` is
suspect as well. Suspicion only raises the gold rate: the quality rule pauses on gold alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, is_dataclass
from typing import ClassVar

import numpy as np

from ..errors import PolicyError
from ..policies._recommend import epoch_end
from ..policies.spec import coerce_value as _coerce

__all__ = ["WorkerHistory", "Schedule", "suspected", "raised_if_suspect", "NoGold", "FixedRate",
           "OnboardingDecay", "Epochs", "PerCategory", "SCHEDULES", "schedule_from_spec"]


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def _number(name: str, value: object, lo: float, hi: float, *, open_lo: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value > lo if open_lo else value >= lo) and value <= hi
    if not ok:
        left = "(" if open_lo else "["
        raise ValueError(f"{name} must be in {left}{lo:g}, {hi:g}], got {value!r}")


@dataclass(frozen=True)
class WorkerHistory:
    """What a schedule may look at: a worker's answered tasks (declines not counted)."""

    n_done: int = 0
    n_gold_done: int = 0
    gold_by_category: tuple[int, ...] = ()
    gold_answered: int = 0  # gold answers judged so far (their labels applied)
    gold_correct: int = 0  # right among them
    agree_answered: float = 0.0  # labels checked by agreement (soft count, issue 41)
    agree_correct: float = 0.0  # judged right among them (soft count)

    def __post_init__(self) -> None:
        for name in ("agree_answered", "agree_correct"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.agree_correct > self.agree_answered + 1e-9:
            raise ValueError(f"agree_correct ({self.agree_correct}) cannot exceed "
                             f"agree_answered ({self.agree_answered})")
        _count("n_done", self.n_done)
        _count("n_gold_done", self.n_gold_done)
        _count("gold_answered", self.gold_answered)
        _count("gold_correct", self.gold_correct)
        if self.gold_correct > self.gold_answered:
            raise ValueError(f"gold_correct ({self.gold_correct}) cannot exceed "
                             f"gold_answered ({self.gold_answered})")
        if self.n_gold_done > self.n_done:
            raise ValueError(f"n_gold_done ({self.n_gold_done}) cannot exceed n_done "
                             f"({self.n_done})")
        object.__setattr__(self, "gold_by_category",
                           tuple(_count("gold_by_category", g) for g in self.gold_by_category))
        if sum(self.gold_by_category) > self.n_gold_done:
            raise ValueError(f"gold_by_category sums to {sum(self.gold_by_category)}, more "
                             f"than n_gold_done ({self.n_gold_done})")


class Schedule:
    """Base class: ``name`` is the spec name; subclasses are frozen dataclasses."""

    name: ClassVar[str] = ""

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        raise NotImplementedError

    def gold_categories(self, history: WorkerHistory) -> np.ndarray | None:
        """Categories the gold task may come from (bool mask), or ``None`` for any."""
        return None

    def next_kind(self, history: WorkerHistory, rng: np.random.Generator) -> str:
        """``"gold"`` or ``"task"``."""
        return "gold" if self.should_inject(history, rng) else "task"


def _below(right: float, answered: float, below: float) -> bool:
    """(right + 1) / (answered + 2), the posterior mean under a uniform prior, is below
    ``below`` (no record: no)."""
    return answered > 0 and (right + 1) / (answered + 2) < below


def suspected(history: WorkerHistory, below: float) -> bool:
    """The worker is suspect: the posterior mean of their accuracy under a uniform prior,
    (c + 1) / (n + 2), is below ``below`` on their gold record or on their agreement record
    (no record: no)."""
    return _below(history.gold_correct, history.gold_answered, below) \
        or _below(history.agree_correct, history.agree_answered, below)


def raised_if_suspect(rate: float, history: WorkerHistory, suspect: float,
                      below: float) -> float:
    """``rate``, raised to ``suspect`` while the worker's record is :func:`suspected`
    (``suspect`` 0: never)."""
    if suspect > 0 and suspected(history, below):
        return max(rate, suspect)
    return rate


def _check_suspect(suspect: float, suspect_below: float) -> None:
    _number("suspect", suspect, 0.0, 1.0)
    _number("suspect_below", suspect_below, 0.0, 1.0, open_lo=True)


@dataclass(frozen=True)
class NoGold(Schedule):
    name: ClassVar[str] = "none"

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        return False


@dataclass(frozen=True)
class FixedRate(Schedule):
    name: ClassVar[str] = "fixed"
    rate: float = 0.1
    suspect: float = 0.0
    suspect_below: float = 0.7

    def __post_init__(self) -> None:
        _number("rate", self.rate, 0.0, 1.0)
        _check_suspect(self.suspect, self.suspect_below)

    def rate_for(self, history: WorkerHistory) -> float:
        """Injection probability for the worker's next task."""
        return raised_if_suspect(self.rate, history, self.suspect, self.suspect_below)

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        return bool(rng.random() < self.rate_for(history))


@dataclass(frozen=True)
class OnboardingDecay(Schedule):
    name: ClassVar[str] = "onboarding"
    n: int = 5
    rate: float = 0.2
    half_life: float = 200.0
    floor: float = 0.02
    suspect: float = 0.0
    suspect_below: float = 0.7

    def __post_init__(self) -> None:
        _count("n", self.n)
        _number("rate", self.rate, 0.0, 1.0)
        _number("half_life", self.half_life, 0.0, math.inf, open_lo=True)
        _number("floor", self.floor, 0.0, 1.0)
        if self.floor > self.rate:
            raise ValueError(f"floor ({self.floor}) must not exceed rate ({self.rate})")
        _check_suspect(self.suspect, self.suspect_below)

    def rate_at(self, n_done: int) -> float:
        """Injection probability for the task after ``n_done`` answered ones."""
        if n_done < self.n:
            return 1.0
        decayed: float = self.rate * 0.5 ** ((n_done - self.n) / self.half_life)
        return max(self.floor, decayed)

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        if history.n_done < self.n:
            return True
        rate = raised_if_suspect(self.rate_at(history.n_done), history, self.suspect,
                                 self.suspect_below)
        return bool(rng.random() < rate)


@dataclass(frozen=True)
class Epochs(Schedule):
    name: ClassVar[str] = "epochs"
    alpha: float = 0.1
    gamma: float = 2.0

    def __post_init__(self) -> None:
        _number("alpha", self.alpha, 0.0, math.inf, open_lo=True)
        _number("gamma", self.gamma, 1.0, 20.0)

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        non_gold = history.n_done - history.n_gold_done
        return bool(non_gold >= int(epoch_end(history.n_gold_done, self.alpha, self.gamma)))


@dataclass(frozen=True)
class PerCategory(Schedule):
    name: ClassVar[str] = "per-category"
    s: int = 3

    def __post_init__(self) -> None:
        _count("s", self.s)

    def _owed(self, history: WorkerHistory) -> np.ndarray:
        if not history.gold_by_category:
            raise ValueError("the per-category schedule needs history.gold_by_category "
                             "(gold answered per category)")
        return np.asarray(history.gold_by_category) < self.s

    def should_inject(self, history: WorkerHistory, rng: np.random.Generator) -> bool:
        return bool(self._owed(history).any())

    def gold_categories(self, history: WorkerHistory) -> np.ndarray | None:
        return self._owed(history)


SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (NoGold, FixedRate, OnboardingDecay, Epochs, PerCategory)}


def schedule_from_spec(text: str) -> Schedule:
    """Build a schedule from ``name`` or ``name:key=value,...`` (e.g. ``fixed:rate=0.1``).

    Raises :class:`~labelq.errors.PolicyError` naming the spec and the problem.
    """
    raw = text
    name, _, rest = text.strip().partition(":")
    name = name.strip()
    if name not in SCHEDULES:
        raise PolicyError(f"unknown gold schedule {name!r} in {raw!r}; known: "
                          f"{', '.join(sorted(SCHEDULES))}", spec=raw)
    cls = SCHEDULES[name]
    allowed: list[str] = [f.name for f in fields(cls)] if is_dataclass(cls) else []  # all are
    params: dict[str, int | float | str] = {}
    for part in filter(str.strip, rest.split(",")) if rest.strip() else ():
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise PolicyError(f"gold schedule {raw!r}: expected key=value, got {part!r}",
                              spec=raw)
        if key not in allowed:
            raise PolicyError(f"gold schedule {name!r} has no parameter {key!r}; it takes: "
                              f"{', '.join(allowed) or 'none'}", spec=raw)
        params[key] = _coerce(value)
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"gold schedule {raw!r}: {exc}", spec=raw) from exc
