"""Calibrating the exported confidences on random gold answers (issue 41).

A confusion model multiplies a task's labels as if their errors were independent, so its
confidences run high (adult2: answers at 1 - 1e-9 right 83 % of the time). With random gold
answers -- a sample like the tasks, each scored with its own gold hidden -- ``auto`` fits
two maps in turn, and only with at least :data:`MIN_ANSWERS` of them (a map fitted on fewer
moves confidences by more than it knows):

1. a **temperature** t (p^t / sum p^t, :func:`labelq.aggregation.auto._temperature`): how
   far to soften every posterior, one parameter by held-out log-likelihood;
2. **Shrunk bins** (:class:`BinnedMap`): the held-out answers split at equal mass into
   ``n // ANSWERS_PER_BIN`` bins (at most :data:`MAX_BINS`); each bin's departure d (its
   Jeffreys share right (r + 1/2) / (n_b + 1) - its mean tempered confidence) is shrunk
   toward 0 -- the identity map -- by empirical Bayes: were the confidences right, d would
   vary by v = c (1 - c) / n_b from sampling alone; the spread of the true departures is
   tau^2 = mean(d^2 - v) (at least 0), and a bin keeps tau^2 / (tau^2 + v) of its
   departure. Where the temperature already made the confidences match the answers, tau^2
   is 0 and the map is the identity; a bin at confidence 0.999 whose answers are right
   80 % of the time keeps nearly all of it, and one whose 25 answers are all right is
   brought to 0.98, not left at 1 (a temperature fitted on answers that are all right
   sharpens without bound). The kept shifts are interpolated linearly between the bins'
   mean confidences (flat beyond them) and added to a task's confidence.

``MAX_BINS`` (10) is a round number. ``ANSWERS_PER_BIN`` (25) was chosen among 10, 25 and
50 on 9 of the shared data sets (athlete, bluebirds, dog, moviereviews_bin, possent_zheng,
rte, sp_amt, temp, zencrowd_in; 12 draws of 50 random gold answers each), the sets
``bench/interval_coverage.py`` measures: the mean ECE differed by less than 0.001 between
them (0.0386 at 25), but at 10 the Jeffreys rate of 10 of 10 right (0.955) pulled athlete's
answers, right 99.6 % of the time, down to an ECE of 0.042 (0.016 at 25). The shrinkage is
fitted on the answers themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, IntArray

__all__ = ["BinnedMap", "fit_binned_map", "recalibrate", "MIN_ANSWERS"]

#: random gold answers needed before any map changes the confidences
MIN_ANSWERS = 50
#: held-out answers per bin of the binned map, and the most bins
ANSWERS_PER_BIN = 25
MAX_BINS = 10


@dataclass(frozen=True)
class BinnedMap:
    """Per bin: the mean confidence of its held-out answers (``centres``, increasing) and
    the shift to add there (``shifts``: the bin's accuracy - mean confidence, shrunk);
    ``spread`` the standard deviation of the true departures the bins suggest (0: the
    identity map)."""

    centres: FloatArray
    shifts: FloatArray
    spread: float

    def __call__(self, confidence: ArrayLike) -> FloatArray:
        c = np.asarray(confidence, float)
        out: FloatArray = c + np.interp(c, self.centres, self.shifts)
        return out


def fit_binned_map(confidence: ArrayLike, right: ArrayLike) -> BinnedMap:
    """The :class:`BinnedMap` of held-out answers with confidences ``confidence`` and
    correctness ``right`` (see the module docstring)."""
    c = np.asarray(confidence, float)
    r = np.asarray(right, float)
    n = c.size
    bins = max(1, min(MAX_BINS, n // ANSWERS_PER_BIN))
    order = np.argsort(c, kind="stable")
    parts = np.array_split(order, bins)
    nb = np.array([p.size for p in parts], dtype=float)
    cb = np.clip(np.array([c[p].mean() for p in parts]), 1e-9, 1 - 1e-9)
    rb = np.array([r[p].sum() for p in parts])
    # empirical Bayes (method of moments): each bin's departure d = rate - mean confidence
    # has sampling variance v = c (1 - c) / n if the confidences are right; the true
    # departures vary by tau^2 = mean(d^2 - v) (>= 0), and each bin keeps the share
    # tau^2 / (tau^2 + v) of its own
    # a bin's share right is its Jeffreys posterior mean: 25 of 25 right is not certainty
    dep = (rb + 0.5) / (nb + 1.0) - cb
    var = cb * (1 - cb) / nb
    tau2 = max(0.0, float(np.mean(dep ** 2 - var)))
    keep = tau2 / (tau2 + var) if tau2 > 0 else np.zeros(bins)
    return BinnedMap(centres=cb, shifts=keep * dep, spread=float(np.sqrt(tau2)))


def recalibrate(probas: FloatArray, labels: IntArray, mapping: BinnedMap) -> FloatArray:
    """``probas`` with each row's ``labels`` entry mapped and the other classes rescaled
    to the rest of the mass (their ratios kept); a confidence stays in [1/K, 1 - 1e-9]."""
    T, K = probas.shape
    rows = np.arange(T)
    old = probas[rows, labels]
    new = np.clip(mapping(old), 1.0 / K, 1 - 1e-9) if K > 1 else old
    rest = 1.0 - old
    sure = rest <= 1e-12  # nothing left to rescale: the freed mass spread evenly
    out: FloatArray = probas * ((1.0 - new) / np.where(sure, 1.0, rest))[:, None]
    out[sure] = ((1.0 - new[sure]) / max(K - 1, 1))[:, None]
    out[rows, labels] = new
    return out
