"""Aggregators by name, and the one-call :func:`aggregate` used by the CLI and exports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from .auto import AutoAggregator
from .base import BaseAggregator, FloatArray, Seed
from .category_ds import CategoryDawidSkene
from .dawid_skene import DawidSkene, OneCoinDawidSkene
from .glad import GLAD
from .kos import KOS
from .majority import MajorityVote, WeightedMajorityVote
from .shrunk import ShrunkOneCoin

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AGGREGATORS", "AggregatorParams", "get_aggregator", "aggregate"]


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

AGGREGATORS: dict[str, type[BaseAggregator]] = {
    "mv": MajorityVote,
    "wmv": WeightedMajorityVote,
    "ds": DawidSkene,
    "onecoin": OneCoinDawidSkene,
    "glad": GLAD,
    "kos": KOS,
    "ds-category": CategoryDawidSkene,
    "shrunk": ShrunkOneCoin,
    "auto": AutoAggregator,
}


def get_aggregator(name: str, **params: Unpack[AggregatorParams]) -> BaseAggregator:
    """Build the aggregator registered as ``name`` with constructor ``params``."""
    try:
        cls = AGGREGATORS[name]
    except KeyError:
        raise InputError(f"unknown aggregation method {name!r}; choose from "
                         f"{', '.join(AGGREGATORS)}", field="method") from None
    factory: Callable[..., BaseAggregator] = cls  # each class takes its own parameters
    try:
        return factory(**params)
    except TypeError as exc:
        raise InputError(f"bad parameters for {name!r}: {exc}", field="method") from exc


def aggregate(task: ArrayLike, worker: ArrayLike, label: ArrayLike, method: str = "auto",
              n_tasks: int | None = None, n_classes: int | None = None,
              categories: ArrayLike | None = None, gold: ArrayLike | None = None, *,
              n_workers: int | None = None, weights: ArrayLike | None = None,
              calibration: ArrayLike | None = None,
              predictions: Mapping[str, FloatArray] | None = None,
              suggested: ArrayLike | None = None,
              **params: Unpack[AggregatorParams]) -> BaseAggregator:
    """Fit ``method`` on label arrays and return the fitted aggregator (the result).

    ``categories`` (int per task) is used by ``ds-category``, by ``auto`` and by ``wmv`` with
    per-(worker, category) ``weights``; ``gold`` (class index or -1 per task) is clamped by
    the EM methods (``ds``, ``onecoin``, ``ds-category``, ``glad``), used by ``auto`` to
    choose and calibrate, and ignored by the voting ones; ``calibration`` (bool per task,
    ``auto`` and ``shrunk``): the gold answers that may calibrate the confidences and the accuracy
    estimate (default all; not tasks chosen for being doubtful). ``predictions`` (every
    method; issue 42): source name -> (n_tasks, n_classes) probabilities of a model, a row
    of NaN where it gave none, used as a source whose reliability is measured
    (:mod:`labelq.aggregation.base`). Read ``labels_``, ``probas_`` and ``confidence_``
    from the result (with predictions also ``source_`` and ``model_accuracy_``).
    """
    agg = get_aggregator(method, **params)
    kw: dict[str, object] = {}
    if agg.uses_gold and gold is not None:
        kw["gold"] = np.asarray(gold)
    if isinstance(agg, (CategoryDawidSkene, AutoAggregator, ShrunkOneCoin)) and categories is not None:
        kw["categories"] = categories
    if isinstance(agg, (AutoAggregator, ShrunkOneCoin)) and calibration is not None:
        kw["calibration"] = np.asarray(calibration, dtype=bool)
    if isinstance(agg, WeightedMajorityVote):
        kw["weights"] = weights
        kw["categories"] = categories
    if predictions:
        kw["predictions"] = predictions
        if suggested is not None:  # bool per label: given with the model's answer shown
            kw["suggested"] = np.asarray(suggested, dtype=bool)
    return agg.fit_with(task, worker, label, kw, n_tasks=n_tasks, n_workers=n_workers,
                        n_classes=n_classes)
