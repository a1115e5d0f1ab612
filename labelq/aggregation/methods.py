"""The aggregation methods ``auto`` chooses among, by name, and how one is built and fitted.

Below both :mod:`.auto` (whose candidates are fitted here) and :mod:`.registry` (every
method, ``auto`` included, and the one-call :func:`~.registry.aggregate`), so that neither
imports the other (issue 43: ``auto`` used to reach back into the registry that registers
it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from .base import BaseAggregator, FloatArray, Seed
from .category_ds import CategoryDawidSkene
from .dawid_skene import DawidSkene, OneCoinDawidSkene
from .glad import GLAD
from .kos import KOS
from .majority import MajorityVote, WeightedMajorityVote
from .shrunk import ShrunkOneCoin

__all__ = ["METHODS", "AggregatorParams", "build", "fit"]


class AggregatorParams(TypedDict, total=False):
    """Constructor parameters of the registered aggregators, by name; each method takes its
    own (see its class), and one it does not take is an :class:`InputError`."""

    # mv, wmv
    tie_break: str
    # mv, wmv, kos
    rng: Seed
    # mv, wmv, ds, onecoin, ds-category, glad
    smoothing: float
    # ds, onecoin, ds-category, glad
    tol: float
    max_iter: int
    # ds, onecoin, ds-category
    diag_prior: float
    # onecoin
    class_prior: str
    # ds-category
    shrinkage: float
    # glad
    alpha_prior: float
    beta_prior: float
    m_step_iter: int
    # kos
    n_iter: int
    degree_normalized: bool
    # shrunk
    prior_accuracy: float
    prior_strength: float
    strength: float
    iters: int
    # auto
    min_gold: int
    folds: int
    min_support: float
    trust_gold: int
    calibrate_gold: int
    seed: int
    model: str | None
    alpha: float


#: every method but ``auto`` (:data:`labelq.aggregation.registry.AGGREGATORS` adds it)
METHODS: dict[str, type[BaseAggregator]] = {
    "mv": MajorityVote,
    "wmv": WeightedMajorityVote,
    "ds": DawidSkene,
    "onecoin": OneCoinDawidSkene,
    "glad": GLAD,
    "kos": KOS,
    "ds-category": CategoryDawidSkene,
    "shrunk": ShrunkOneCoin,
}


def build(name: str, params: Mapping[str, object],
          methods: Mapping[str, type[BaseAggregator]] = METHODS) -> BaseAggregator:
    """The aggregator registered in ``methods`` as ``name``, built with constructor
    ``params`` (an unknown name or parameter: :class:`InputError`)."""
    try:
        cls = methods[name]
    except KeyError:
        raise InputError(f"unknown aggregation method {name!r}; choose from "
                         f"{', '.join(methods)}", field="method") from None
    factory: Callable[..., BaseAggregator] = cls  # each class takes its own parameters
    try:
        return factory(**params)
    except TypeError as exc:
        raise InputError(f"bad parameters for {name!r}: {exc}", field="method") from exc


def fit(agg: BaseAggregator, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
        n_tasks: int | None = None, n_classes: int | None = None,
        n_workers: int | None = None, categories: ArrayLike | None = None,
        gold: ArrayLike | None = None, weights: ArrayLike | None = None,
        calibration: ArrayLike | None = None,
        predictions: Mapping[str, FloatArray] | None = None,
        suggested: ArrayLike | None = None) -> BaseAggregator:
    """Fit ``agg`` on label arrays, passing each the keyword arguments it takes (see
    :func:`labelq.aggregation.registry.aggregate`); returns ``agg``."""
    kw: dict[str, object] = {}
    if agg.uses_gold and gold is not None:
        kw["gold"] = np.asarray(gold)
    if isinstance(agg, WeightedMajorityVote):
        kw["weights"] = weights
        kw["categories"] = categories
    elif agg.uses_categories and categories is not None:
        kw["categories"] = categories
    if agg.uses_calibration and calibration is not None:
        kw["calibration"] = np.asarray(calibration, dtype=bool)
    if predictions:
        kw["predictions"] = predictions
        if suggested is not None:  # bool per label: given with the model's answer shown
            kw["suggested"] = np.asarray(suggested, dtype=bool)
    return agg.fit_with(task, worker, label, kw, n_tasks=n_tasks, n_workers=n_workers,
                        n_classes=n_classes)
