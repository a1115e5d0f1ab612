"""Expose any posterior (e.g. a policy's own ``predict_proba``) as an aggregation result."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..policies.base import Policy
from .base import FloatArray, IntArray, argmax_first

__all__ = ["PosteriorAggregator"]


class PosteriorAggregator:
    """Wrap a ready-made posterior in the aggregator result interface.

    ``PosteriorAggregator(probas)`` takes an (n_tasks, n_classes) array; or
    ``PosteriorAggregator.from_policy(policy, state)`` calls ``policy.predict_proba(state)``
    (Opt-KG's Beta/Dirichlet posterior, the uniform policy's counts, ...). Rows are
    validated (finite, >= 0) and renormalised; all-zero rows become uniform. ``fit`` ignores
    label arrays -- the model was fitted by whoever produced the posterior -- so the object
    can stand wherever an aggregator is expected. Ties go to the lowest class index.
    """

    probas_: FloatArray
    labels_: IntArray
    confidence_: FloatArray

    def __init__(self, probas: ArrayLike) -> None:
        p = np.asarray(probas, dtype=float)
        if p.ndim != 2 or p.shape[1] < 1:
            raise InputError(f"probas must be (n_tasks, n_classes), got shape {p.shape}",
                             field="probas")
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise InputError("probas must be finite and >= 0", field="probas")
        total = p.sum(axis=1, keepdims=True)
        empty = total[:, 0] == 0
        p = np.where(empty[:, None], 1.0 / p.shape[1], p / np.where(total == 0, 1.0, total))
        self.probas_ = p
        self.labels_ = argmax_first(p)
        self.confidence_ = p[np.arange(p.shape[0]), self.labels_]

    @classmethod
    def from_policy(cls, policy: Policy, state: object) -> PosteriorAggregator:
        """Use ``policy.predict_proba(state)`` as the posterior."""
        return cls(policy.predict_proba(state))

    def fit(self, *args: object, **kwargs: object) -> PosteriorAggregator:
        return self

    def fit_predict(self, *args: object, **kwargs: object) -> IntArray:
        return self.labels_

    def fit_predict_proba(self, *args: object, **kwargs: object) -> FloatArray:
        return self.probas_
