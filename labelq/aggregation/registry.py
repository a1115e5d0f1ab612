"""Aggregators by name, and the one-call :func:`aggregate` used by the CLI and exports.

The methods and how one is fitted are :mod:`.methods` (below :mod:`.auto`, which fits its
candidates there); this module adds ``auto``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

from .auto import AutoAggregator
from .base import BaseAggregator, FloatArray
from .methods import METHODS, AggregatorParams, build, fit

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AGGREGATORS", "AggregatorParams", "get_aggregator", "aggregate"]

AGGREGATORS: dict[str, type[BaseAggregator]] = {**METHODS, "auto": AutoAggregator}


def get_aggregator(name: str, **params: Unpack[AggregatorParams]) -> BaseAggregator:
    """Build the aggregator registered as ``name`` with constructor ``params``."""
    return build(name, params, AGGREGATORS)


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
    return fit(get_aggregator(method, **params), task, worker, label, n_tasks=n_tasks,
               n_classes=n_classes, n_workers=n_workers, categories=categories, gold=gold,
               weights=weights, calibration=calibration, predictions=predictions,
               suggested=suggested)
