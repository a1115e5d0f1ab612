"""Which workers to pause: a quality rule on gold accuracy.

Rule. Pause worker w when it has answered at least ``min_gold`` gold questions and the Beta
posterior of its gold accuracy (see :mod:`labelq.gold.scoring`) puts more than
``confidence`` probability below ``threshold``:

    pause(w)  ⇔  n_w ≥ min_gold  and  P(a_w < threshold | gold answers) > confidence

Why the posterior probability rather than the posterior mean: a mean rule pauses on noise.
With threshold 0.7 and 10 gold answers under Beta(1, 1), the mean (c + 1)/12 is below 0.7
for c ≤ 7 correct, so a worker of true accuracy 0.75 would be paused with probability
P(Binomial(10, 0.75) ≤ 7) ≈ 0.47. The posterior rule pauses at c ≤ 4 (P(a < 0.7) ≈ 0.98;
at 5 of 10 it is ≈ 0.92), which happens to that worker with probability ≈ 0.02, while a
worker of accuracy 0.5 is caught at n = 10 with probability ≈ 0.38 and surely as gold
accumulates. The rule is equivalent to "the upper one-sided (confidence) credible bound is
below the threshold", so a worker close to the threshold needs more gold answers before
being paused than one far below it.

Looking again after every gold answer. The rule is checked each time gold arrives, so the
chance that a worker is *ever* paused is larger than at one look. Measured (20,000 simulated
workers, threshold 0.7, confidence 0.95, min_gold 10; table and script in docs/gold.md): a
worker of accuracy 0.75 is paused within 100 gold answers with probability 0.08 (0.02 at one
look at 10), one of accuracy exactly 0.7 with 0.25, and a 0.5 spammer with 0.96 within 50.

``rule="sequential"`` bounds that: pause when the mixture likelihood ratio of "accuracy below
threshold" against "accuracy = threshold" (:meth:`GoldScores.log_evidence_below`) reaches
1 / (1 − confidence). For any worker whose accuracy is at least ``threshold`` it is a
nonnegative supermartingale, so by Ville's inequality the probability that such a worker is
*ever* paused, however many gold answers are looked at, is at most 1 − confidence (measured
0.02 at accuracy 0.7 over 200 answers). The price is evidence: a 0.5 spammer is caught
within 50 gold answers with probability 0.62, within 100 with 0.91 (0.35-accurate: 0.99
within 50). Choose ``posterior`` (default) to stop bad work fast, ``sequential`` when a
wrongly paused annotator is the costlier mistake.

Choosing ``confidence`` for a false-pause target. With ``sequential``, 1 − confidence *is*
the bound on the share of annotators at or above the threshold ever paused: confidence 0.99
for at most 1 %. With ``posterior`` no confidence says that, as the bound depends on how many
gold answers are looked at. ``labelq demo`` (threshold 0.6, min_gold 8) used the posterior
rule at 0.95, and a new user saw an annotator of accuracy 0.72 paused (issue 34): P(a < 0.6)
at 4 of 10 is 0.90, below 0.95, so the pause came at an earlier look (3 of 10 gives 0.971,
2 of 8 0.975), the answers already on their way counting afterwards. Simulated over the
demo's 40 gold questions (``bench/gold_suspicion.py``), that rule pauses 18 % of the
annotators exactly at 0.6 (0.45 % of the demo's skilled ones, accuracy 0.65–0.95); the demo
now uses ``sequential`` at 0.99: 0.4 % at the bar, for a careless annotator (accuracy 0.35)
caught about half the time within those 40 gold answers instead of 95 % — and since issue
41 gives a suspect only gold from a pool of 100, 96 % of them (simulated; docs/gold.md).

``per_category=False`` (default) pools a worker's gold over categories; ``True`` pauses a
worker whose accuracy in *any* category qualifies (each category then needs ``min_gold``;
with ``sequential`` the bound on a wrongful pause becomes K·(1 − confidence) for K categories).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..policies.base import BoolArray, IntArray
from .scoring import GoldScores

__all__ = ["QualityRule"]


@dataclass(frozen=True)
class QualityRule:
    threshold: float = 0.7
    min_gold: int = 10
    confidence: float = 0.95
    per_category: bool = False
    rule: str = "posterior"

    RULES = ("posterior", "sequential")

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold!r}")
        if isinstance(self.min_gold, bool) or not isinstance(self.min_gold, int) \
                or self.min_gold < 1:
            raise ValueError(f"min_gold must be an integer >= 1, got {self.min_gold!r}")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, (int, float)) \
                or not math.isfinite(self.confidence) or not 0.5 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if self.rule not in self.RULES:
            raise ValueError(f"rule must be one of {', '.join(self.RULES)}, got {self.rule!r}")

    def pause_mask(self, scores: GoldScores) -> BoolArray:
        """bool (n_workers,): True for workers to pause."""
        pooled = not self.per_category
        total = scores.total.sum(axis=1) if pooled else scores.total
        evidence: BoolArray
        if self.rule == "sequential":
            evidence = scores.log_evidence_below(self.threshold, pooled) \
                >= -math.log1p(-self.confidence)
        else:
            evidence = scores.prob_below(self.threshold, pooled) > self.confidence
        flag: BoolArray = (total >= self.min_gold) & evidence
        if pooled:
            return flag
        per_worker: BoolArray = np.any(flag, axis=1)
        return per_worker

    def workers_to_pause(self, scores: GoldScores) -> IntArray:
        """Indices of the workers to pause, ascending."""
        return np.flatnonzero(self.pause_mask(scores))
