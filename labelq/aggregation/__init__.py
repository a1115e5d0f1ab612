"""Label aggregation (truth inference) and inter-annotator agreement, over dense arrays.

Aggregators follow crowd-kit's shape -- small classes, hyper-parameters in the
constructor, ``fit(...) -> self``, results in ``labels_`` / ``probas_`` / ``confidence_``
-- but take integer numpy arrays (the data contract is on :class:`BaseAggregator`).

>>> from labelq.aggregation import aggregate
>>> aggregate([0, 0, 0, 1], [0, 1, 2, 0], [1, 1, 0, 0], method="mv").labels_
array([1, 0])
"""

from .agreement import (
                        WorkerAccuracy,
                        expected_accuracy,
                        fleiss_kappa,
                        fleiss_kappa_counts,
                        krippendorff_alpha,
                        krippendorff_alpha_counts,
                        worker_accuracy,
)
from .auto import AutoAggregator, Evidence, evidence
from .base import BaseAggregator
from .category_ds import CategoryDawidSkene
from .dawid_skene import DawidSkene, OneCoinDawidSkene
from .glad import GLAD
from .kos import KOS
from .majority import MajorityVote, WeightedMajorityVote
from .posterior import PosteriorAggregator
from .registry import AGGREGATORS, AggregatorParams, aggregate, get_aggregator
from .shrunk import ShrunkOneCoin

__all__ = [
    "AGGREGATORS", "AggregatorParams", "AutoAggregator", "BaseAggregator",
    "CategoryDawidSkene", "DawidSkene",
    "Evidence", "GLAD", "KOS", "MajorityVote", "OneCoinDawidSkene", "PosteriorAggregator",
    "ShrunkOneCoin",
    "WeightedMajorityVote", "WorkerAccuracy", "aggregate", "evidence", "expected_accuracy",
    "fleiss_kappa", "fleiss_kappa_counts", "get_aggregator", "krippendorff_alpha",
    "krippendorff_alpha_counts", "worker_accuracy",
]
