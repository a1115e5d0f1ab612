"""Many runs of several policies over budgets: seeds, parallelism, mean ± standard error.

A run r draws its environment from ``SeedSequence(seed, spawn_key=(r, 0))`` (a new synthetic
task set per run; a replay is the same data every run) and each policy its own generator
from ``SeedSequence(seed, spawn_key=(r, 1, crc32(spec)))``, so a policy's numbers do not
depend on which other policies are run beside it, and every run is reproducible from the
seed alone — whatever ``jobs`` is. With ``shuffle``, the same environment generator then
puts a replay's tasks and workers in a random order, so every policy of a run sees the same
order.

With ``gold`` (``labelq simulate --gold``), the same environment generator then draws the
gold questions among the tasks with a truth (:func:`labelq.simulate.gold.with_gold`), after
the shuffle, so every policy of a run gets the same gold; the runner serves them by
``gold_schedule`` and judges them by ``quality`` (:mod:`labelq.simulate.gold`). Without it
nothing is drawn and a run is what it was before.

Policies whose behaviour does not depend on the total budget (``budget_aware = False``, the
default) run once per run to the largest budget, recording every checkpoint on the way;
budget-aware ones run once per budget.

Budgets are given per task: the budget of a run is ``budget_per_task × n_tasks`` in cost
units (labels, when every worker costs 1).
"""

from __future__ import annotations

import multiprocessing
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..policies import build
from .environment import Environment
from .gold import GoldRules, n_gold, parse_gold_amount, with_gold
from .runner import Aggregator, Checkpoint, run_policy

if TYPE_CHECKING:
    from ..aggregation.registry import AggregatorParams
    from ..policies.base import FloatArray, IntArray

__all__ = ["EnvSource", "Experiment", "PointSummary", "run_experiment", "load_aggregator",
           "run_rngs"]


@lru_cache(maxsize=8)
def _load_replay(directory: str) -> Environment:
    from ..datasets import load_dataset
    from .replay import replay_environment
    return replay_environment(load_dataset(directory))


@lru_cache(maxsize=8)
def _load_predictions(directory: str, path: str) -> dict[str, FloatArray]:
    """The model's predictions ``path`` for the data set ``directory``, as the source
    ``{file stem: (n_tasks, n_classes) array}`` (:mod:`labelq.simulate.predictions`)."""
    from ..datasets import load_dataset
    from .predictions import read_predictions_csv, source_name
    data = load_dataset(directory)
    return {source_name(path): read_predictions_csv(path, data.tasks, data.classes)}


#: what a policy's row is called when it ran with the model's predictions
WITH_MODEL = " +model"


@dataclass(frozen=True)
class EnvSource:
    """Where environments come from: ``kind`` "data" (a data set folder) or "synthetic"
    (a spec string). Picklable, so worker processes rebuild environments themselves."""

    kind: str
    value: str
    predictions: str | None = None  # a predictions file (``--data`` only)

    def build(self, rng: np.random.Generator) -> Environment:
        if self.kind == "data":
            env = _load_replay(self.value)
            if self.predictions is not None:
                env = env.with_predictions(_load_predictions(self.value, self.predictions))
            return env
        if self.kind == "synthetic":
            from .synthetic import make_synthetic
            return make_synthetic(self.value, rng)
        raise InputError(f"unknown environment kind {self.kind!r}")

    def n_tasks(self) -> int:
        if self.kind == "data":
            return _load_replay(self.value).n_tasks
        from .synthetic import SyntheticSpec
        return SyntheticSpec.parse(self.value).tasks

    def gold_candidates(self) -> int:
        """Tasks that ``--gold`` may make gold: with a truth, not gold already."""
        if self.kind == "data":
            env = _load_replay(self.value)
            return int(np.count_nonzero(env.truth >= 0))
        from .synthetic import SyntheticSpec
        spec = SyntheticSpec.parse(self.value)
        return spec.tasks - int(round(spec.gold * spec.tasks))

    def describe(self) -> str:
        out = f"--data {self.value}" if self.kind == "data" else f"--synthetic {self.value}"
        return out + (f" --predictions {self.predictions}" if self.predictions else "")

    def model_accuracy(self) -> float | None:
        """The model alone: accuracy of its top class over the tasks with a truth and a
        prediction (ties count 1/k), or None without predictions."""
        if self.predictions is None or self.kind != "data":
            return None
        from ..aggregation.agreement import expected_accuracy
        env = _load_replay(self.value)
        p = next(iter(_load_predictions(self.value, self.predictions).values()))
        have = ~np.isnan(p).any(axis=1)
        return expected_accuracy(p[have], env.truth[have])


def load_aggregator(method: str, *, categories: IntArray | None = None,
                    model: str | None = None,
                    predictions: dict[str, FloatArray] | None = None) -> Aggregator:
    """An aggregator ``f(task, worker, label, n_tasks, n_classes)`` from
    ``labelq.aggregation.aggregate`` (built separately); :class:`InputError` if absent.
    ``categories`` (per task) reach the category-aware methods as the export gives them;
    ``model`` is ``auto``'s richer model (``shrunk`` when the policy is ``auto``, as the
    export of an ``auto`` project does); ``predictions``: models' predictions it combines
    with the labels (issue 42)."""
    try:
        from ..aggregation import aggregate
    except ImportError as exc:
        raise InputError(f"--aggregate {method}: labelq.aggregation is not available "
                         f"({exc})") from exc

    def run(task: IntArray, worker: IntArray, label: IntArray, n_tasks: int, n_classes: int,
            gold: IntArray | None = None) -> FloatArray | IntArray:
        if task.size == 0 and not predictions:
            return np.full((n_tasks, n_classes), 1.0 / n_classes)
        extra: AggregatorParams = {"model": model} if model is not None else {}
        out: object = aggregate(task, worker, label, method, n_tasks, n_classes, gold=gold,
                                categories=categories, predictions=predictions, **extra)
        for attr in ("proba", "probas", "probas_", "labels", "labels_"):
            if hasattr(out, attr):
                out = getattr(out, attr)
                break
        if isinstance(out, tuple):
            out = out[0]
        return np.asarray(out)

    return run


@dataclass(frozen=True)
class _Unit:
    source: EnvSource
    spec: str
    run: int
    seed: int
    budgets: tuple[float, ...]
    aggregate: str | None
    max_labels_per_task: int | None
    mode: str | None = None
    shuffle: bool = False
    gold: float | int | None = None
    gold_schedule: str | None = None
    quality: str | None = None
    model: bool = True  # with the source's predictions (if it has any)

    @property
    def key(self) -> str:
        """The row this unit's results go to."""
        return self.spec + (WITH_MODEL if self.model and self.source.predictions else "")


def run_rngs(seed: int, run: int, spec: str) -> tuple[np.random.Generator,
                                                      np.random.Generator]:
    """The generators of run ``run`` (see the module docstring): the environment's, the
    same for every policy, and the policy's own, keyed by its spec."""
    env_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(run, 0)))
    key = zlib.crc32(spec.encode())
    return env_rng, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(run, 1, key)))


def _run_unit(unit: _Unit) -> tuple[_Unit, list[Checkpoint]]:
    env_rng, rng = run_rngs(unit.seed, unit.run, unit.spec)
    env = unit.source.build(env_rng)
    if not unit.model:
        env = env.with_predictions(None)
    if unit.shuffle:
        env = env.shuffled(env_rng)
    rules = None
    if unit.gold is not None:
        env = with_gold(env, unit.gold, env_rng)  # after the shuffle: the same for every policy
        rules = GoldRules.parse(unit.gold_schedule, unit.quality)
    policy = build(unit.spec)
    # the export of a project routed by auto uses auto's worker model (exporting.py)
    model = "shrunk" if unit.aggregate == "auto" and policy.name == "auto" else None
    agg = load_aggregator(unit.aggregate, categories=env.task_category, model=model,
                          predictions=env.predictions) if unit.aggregate else None
    return unit, run_policy(policy, env, unit.budgets, rng,
                            max_labels_per_task=unit.max_labels_per_task, aggregate=agg,
                            mode=unit.mode, gold=rules)


@dataclass
class PointSummary:
    budget_per_task: float
    labels: float
    accuracy: list[float] = field(default_factory=list)
    accuracy_aggregate: list[float] = field(default_factory=list)
    spent: list[float] = field(default_factory=list)
    tasks_completed: list[float] = field(default_factory=list)
    gold_labels: list[float] = field(default_factory=list)
    paused: list[float] = field(default_factory=list)
    with_gold: bool = False

    @staticmethod
    def _mean_se(values: list[float]) -> tuple[float, float]:
        a = np.asarray(values, dtype=float)
        if a.size == 0:
            return float("nan"), float("nan")
        se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0
        return float(a.mean()), se

    def to_dict(self) -> dict[str, Any]:
        mean, se = self._mean_se(self.accuracy)
        out: dict[str, Any] = {
            "budget_per_task": _num(self.budget_per_task), "labels": _num(self.labels),
            "accuracy_mean": mean, "accuracy_se": se, "runs": len(self.accuracy),
            "spent_mean": float(np.mean(self.spent)),
            "tasks_completed_mean": float(np.mean(self.tasks_completed)),
        }
        if self.accuracy_aggregate:
            m, s = self._mean_se(self.accuracy_aggregate)
            out["aggregate_accuracy_mean"], out["aggregate_accuracy_se"] = m, s
        if self.with_gold:
            out["gold_labels_mean"] = float(np.mean(self.gold_labels))
            out["paused_mean"] = float(np.mean(self.paused))
        return out


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


@dataclass
class Experiment:
    source: EnvSource
    specs: list[str]
    budgets_per_task: list[float]
    n_tasks: int
    points: dict[str, list[PointSummary]]
    aggregate: str | None = None
    gold: float | int | None = None
    gold_schedule: str | None = None
    quality: str | None = None
    model_accuracy: float | None = None  # the model alone (with predictions)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policies": [{"spec": s, "points": [p.to_dict() for p in
                                                                   self.points[s]]}
                                            for s in self.specs]}
        if self.model_accuracy is not None:
            out["model_alone_accuracy"] = self.model_accuracy
        return out


def run_experiment(source: EnvSource, specs: Sequence[str], budgets_per_task: Sequence[float],
                   *, runs: int = 20, seed: int = 0, jobs: int = 1,
                   aggregate: str | None = None, max_labels_per_task: int | None = None,
                   mode: str | None = None, progress: Callable[[int, int], None] | None = None,
                   shuffle: bool = False, gold: float | int | str | None = None,
                   gold_schedule: str | None = None,
                   quality: str | None = None) -> Experiment:
    """Run every policy ``runs`` times; ``progress(done, total)`` is called per finished unit.
    ``mode`` ("push", "pull" or "task", see :func:`run_policy`) overrides every
    policy's own mode. ``shuffle`` replays a data set with its tasks and workers in a new
    random order each run, the same order for every policy of the run
    (:meth:`Environment.shuffled`). ``gold`` (a share in (0, 1) or a count, see
    :func:`~labelq.simulate.gold.parse_gold_amount`) makes a sample of the tasks with a truth
    gold questions, served by ``gold_schedule`` (default
    :data:`~labelq.simulate.gold.DEFAULT_SCHEDULE`) and judged by ``quality``.

    A ``source`` with ``predictions`` (``labelq simulate --predictions``) runs every policy
    twice per run, with the model's predictions available from the start (row
    ``SPEC +model``; the budget counts human labels only) and without (row ``SPEC``), on
    the same order, gold and policy generator; ``model_accuracy`` is the model alone."""
    if runs < 1:
        raise InputError(f"runs must be >= 1, got {runs}")
    if source.predictions is not None:
        if source.kind != "data":
            raise InputError("--predictions needs --data (a data set whose tasks the "
                             "predictions name)", field="predictions")
        _load_predictions(source.value, source.predictions)  # file errors now
    specs = list(dict.fromkeys(specs))
    per_task = sorted(set(float(b) for b in budgets_per_task))
    if not per_task or per_task[0] < 0:
        raise InputError("budgets per task must be non-negative numbers")
    for s in specs:
        build(s)  # validate early, in this process
    if aggregate:
        load_aggregator(aggregate)
    if gold is not None:
        gold = parse_gold_amount(gold)
        GoldRules.parse(gold_schedule, quality)  # errors now, naming the option
        n_gold(gold, source.gold_candidates())
    else:
        for option, value in (("--gold-schedule", gold_schedule), ("--quality", quality)):
            if value is not None:
                raise InputError(f"{option} needs --gold (the share or number of tasks to "
                                 f"serve as gold questions)", field=option[2:])
    n_tasks = source.n_tasks()
    budgets = tuple(b * n_tasks for b in per_task)
    units: list[_Unit] = []
    for s in specs:
        budget_aware = bool(getattr(build(s), "budget_aware", False))
        groups = [(b,) for b in budgets] if budget_aware else [budgets]
        for r in range(runs):
            for model in ((False, True) if source.predictions else (True,)):
                units += [_Unit(source, s, r, seed, g, aggregate, max_labels_per_task, mode,
                                shuffle, gold, gold_schedule, quality, model)
                          for g in groups]
    rows = [k for s in specs for k in ((s, s + WITH_MODEL) if source.predictions else (s,))]
    points = {s: [PointSummary(bpt, b, with_gold=gold is not None)
                  for bpt, b in zip(per_task, budgets, strict=True)] for s in rows}
    index = {b: k for k, b in enumerate(budgets)}
    results: list[tuple[_Unit, list[Checkpoint]]] = []
    done = 0
    if jobs > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(min(jobs, len(units))) as pool:
            for res in pool.imap_unordered(_run_unit, units):
                results.append(res)
                done += 1
                if progress:
                    progress(done, len(units))
    else:
        for u in units:
            results.append(_run_unit(u))
            done += 1
            if progress:
                progress(done, len(units))
    results.sort(key=lambda r: (rows.index(r[0].key), r[0].run, r[0].budgets))
    for unit, cps in results:
        for cp in cps:
            pt = points[unit.key][index[cp.budget]]
            pt.accuracy.append(cp.accuracy)
            pt.spent.append(cp.spent)
            pt.tasks_completed.append(cp.tasks_completed)
            pt.gold_labels.append(cp.gold_labels)
            pt.paused.append(cp.paused)
            if cp.accuracy_aggregate is not None:
                pt.accuracy_aggregate.append(cp.accuracy_aggregate)
    return Experiment(source, rows, per_task, n_tasks, points, aggregate, gold,
                      gold_schedule, quality, source.model_accuracy())
