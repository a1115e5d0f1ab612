"""Per-worker, per-category accuracy on gold questions, as a Beta posterior.

Model. Worker w answers gold questions of category k correctly with unknown probability
a_{w,k}; with prior a ~ Beta(α₀, β₀) (default Beta(1, 1), uniform) and ``correct`` right
answers out of ``total``, the posterior is Beta(α₀ + correct, β₀ + total − correct):

* mean (α₀ + c) / (α₀ + β₀ + n);
* equal-tailed credible interval from the Beta quantiles;
* P(a < θ | data), the Beta CDF at θ — what :mod:`labelq.gold.quality` decides on;
* the log of the mixture likelihood ratio of "a < θ" against "a = θ"
  (:meth:`GoldScores.log_evidence_below`), the anytime-valid alternative.

``pooled=True`` sums a worker's counts over categories first (the prior counts once).
Everything is vectorised over (workers, categories); :meth:`GoldScores.record` takes arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import betainc, betaln

from ..policies.base import FloatArray

__all__ = ["BetaPrior", "GoldScores"]


@dataclass(frozen=True)
class BetaPrior:
    a: float = 1.0
    b: float = 1.0

    def __post_init__(self) -> None:
        for name in ("a", "b"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(f"prior {name} must be a finite number > 0, got {value!r}")


@dataclass
class GoldScores:
    """Gold counts: ``correct[w, k]`` right answers out of ``total[w, k]``."""

    correct: FloatArray  # (n_workers, n_categories)
    total: FloatArray  # (n_workers, n_categories)
    prior: BetaPrior = BetaPrior()

    def __post_init__(self) -> None:
        self.correct = np.asarray(self.correct, dtype=float)
        self.total = np.asarray(self.total, dtype=float)
        if self.correct.shape != self.total.shape or self.correct.ndim != 2:
            raise ValueError(f"correct and total must be 2-d of one shape, got "
                             f"{self.correct.shape} and {self.total.shape}")
        if (self.correct < 0).any() or (self.correct > self.total).any():
            raise ValueError("need 0 <= correct <= total everywhere")

    @classmethod
    def zeros(cls, n_workers: int, n_categories: int = 1,
              prior: BetaPrior = BetaPrior()) -> GoldScores:
        shape = (n_workers, n_categories)
        return cls(np.zeros(shape), np.zeros(shape), prior)

    def record(self, workers: ArrayLike, categories: ArrayLike, correct: ArrayLike) -> None:
        """Add gold answers in place (arrays or scalars; repeated pairs all count)."""
        w, k, c = np.broadcast_arrays(np.asarray(workers, dtype=np.int64),
                                      np.asarray(categories, dtype=np.int64),
                                      np.asarray(correct, dtype=bool))
        np.add.at(self.total, (w, k), 1.0)
        np.add.at(self.correct, (w, k), c.astype(float))

    def posterior(self, pooled: bool = False) -> tuple[FloatArray, FloatArray]:
        """Beta parameters (α, β) of the posterior, (W, K) or (W,) when pooled."""
        c, n = (self.correct.sum(axis=1), self.total.sum(axis=1)) if pooled \
            else (self.correct, self.total)
        return self.prior.a + c, self.prior.b + n - c

    def mean(self, pooled: bool = False) -> FloatArray:
        a, b = self.posterior(pooled)
        out: FloatArray = a / (a + b)
        return out

    def credible_interval(self, level: float = 0.95,
                          pooled: bool = False) -> tuple[FloatArray, FloatArray]:
        """Equal-tailed interval holding ``level`` of the posterior mass."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        a, b = self.posterior(pooled)
        tail = (1 - level) / 2
        low: FloatArray = stats.beta.ppf(tail, a, b)
        high: FloatArray = stats.beta.ppf(1 - tail, a, b)
        return low, high

    def prob_below(self, threshold: float, pooled: bool = False) -> FloatArray:
        """Posterior probability that the accuracy is below ``threshold``."""
        a, b = self.posterior(pooled)
        out: FloatArray = stats.beta.cdf(threshold, a, b)
        return out

    def log_evidence_below(self, threshold: float, pooled: bool = False) -> FloatArray:
        """log M, where M = ∫_{a<θ} [L(a) / L(θ)] π(a | a < θ) da is the likelihood ratio of
        the data under accuracies below θ = ``threshold`` (the prior restricted to [0, θ])
        against accuracy θ.

        With c right out of n and prior Beta(α₀, β₀), in closed form:

            M = B(α₀+c, β₀+n−c) I_θ(α₀+c, β₀+n−c) / (B(α₀, β₀) I_θ(α₀, β₀) θ^c (1−θ)^(n−c))

        For a worker whose true accuracy is ≥ θ, M is a nonnegative supermartingale with
        M₀ = 1 (each factor a'x/θ + (1−a')(1−x)/(1−θ) with a' < θ has mean ≤ 1), so by
        Ville's inequality P(M ever reaches 1/δ) ≤ δ however often it is looked at. Computed in
        log space (betaln, log betainc): M spans hundreds of orders of magnitude.
        """
        a, b = self.posterior(pooled)
        c, n_c = a - self.prior.a, b - self.prior.b
        a0, b0 = self.prior.a, self.prior.b
        with np.errstate(divide="ignore"):
            out: FloatArray = (betaln(a, b) + np.log(betainc(a, b, threshold))
                               - betaln(a0, b0) - np.log(betainc(a0, b0, threshold))
                               - c * np.log(threshold) - n_c * np.log1p(-threshold))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct.tolist(), "total": self.total.tolist(),
                "prior": {"a": self.prior.a, "b": self.prior.b}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GoldScores:
        return cls(np.asarray(data["correct"], float), np.asarray(data["total"], float),
                   BetaPrior(**data.get("prior", {})))
