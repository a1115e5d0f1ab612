"""Inter-annotator agreement: Krippendorff's alpha, Fleiss' kappa, per-worker accuracy.

All functions take the long label arrays of the aggregator data contract (or, for the
``*_counts`` variants, a (units x classes) matrix of how many ratings each class got).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from .base import FloatArray, IntArray, check_labels, count_matrix

__all__ = ["krippendorff_alpha", "krippendorff_alpha_counts", "fleiss_kappa",
           "fleiss_kappa_counts", "WorkerAccuracy", "worker_accuracy", "expected_accuracy"]


def expected_accuracy(scores: ArrayLike, truth: IntArray, tol: float = 1e-12) -> float:
    """Accuracy of argmax(scores) against ``truth`` (entries < 0 ignored), ties counted as
    the expectation of a uniform random tie break. ``scores`` may be (n, C) or class
    indices (n,)."""
    known = truth >= 0
    if not known.any():
        return float("nan")
    arr = np.asarray(scores)
    t = truth[known]
    if arr.ndim == 1:
        return float(np.mean(arr[known] == t))
    s = arr[known]
    top = s >= s.max(axis=1, keepdims=True) - tol
    return float(np.mean(top[np.arange(t.size), t] / top.sum(axis=1)))


def _counts(task: ArrayLike, label: ArrayLike, n_tasks: int | None,
            n_classes: int | None) -> FloatArray:
    d = check_labels(task, np.zeros(np.asarray(task).shape[0], dtype=np.int64), label,
                     n_tasks, 1, n_classes)
    out: FloatArray = count_matrix(d.task, d.label, d.n_tasks, d.n_classes).toarray()
    return out


def krippendorff_alpha_counts(counts: ArrayLike) -> float:
    r"""Nominal Krippendorff's alpha from a (units x values) count matrix.

    Krippendorff (2011), *Computing Krippendorff's alpha-reliability*. Units with fewer than
    two values are not pairable and are dropped (this is how missing data is handled).
    Coincidences :math:`o_{ck} = \sum_u (n_{uc} n_{uk} - [c=k] n_{uc}) / (m_u - 1)`,
    :math:`n_c = \sum_k o_{ck}`, :math:`n = \sum_c n_c`, and

    .. math:: \alpha = 1 - (n - 1) \frac{\sum_{c \ne k} o_{ck}}{\sum_{c \ne k} n_c n_k}.

    Returns NaN when fewer than two pairable values exist or only one value occurs
    (expected disagreement 0).
    """
    N = np.asarray(counts, dtype=float)
    if N.ndim != 2:
        raise InputError(f"counts must be 2-D (units x values), got shape {N.shape}")
    m = N.sum(axis=1)
    N, m = N[m >= 2], m[m >= 2]
    if N.size == 0:
        return float("nan")
    scaled = N / (m - 1)[:, None]
    o = N.T @ scaled - np.diag(scaled.sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    observed = o.sum() - np.trace(o)
    expected = n * n - np.sum(n_c ** 2)
    if expected <= 0:
        return float("nan")
    return float(1.0 - (n - 1) * observed / expected)


def krippendorff_alpha(task: ArrayLike, label: ArrayLike, n_tasks: int | None = None,
                       n_classes: int | None = None) -> float:
    """Nominal Krippendorff's alpha of long-format labels (each label is one value; a
    worker repeating a task contributes each repeat). See :func:`krippendorff_alpha_counts`."""
    return krippendorff_alpha_counts(_counts(task, label, n_tasks, n_classes))


def fleiss_kappa_counts(counts: ArrayLike, *, strict: bool = False) -> float:
    r"""Fleiss' kappa from a (subjects x categories) count matrix.

    Fleiss (1971). With :math:`n_i` ratings of subject :math:`i`,
    :math:`P_i = (\sum_k n_{ik}^2 - n_i) / (n_i (n_i - 1))`, :math:`\bar P` their mean,
    :math:`p_k` the share of all ratings in category :math:`k`, :math:`P_e = \sum_k p_k^2`,
    :math:`\kappa = (\bar P - P_e) / (1 - P_e)`.

    Fleiss defined it for an equal number of ratings per subject. Otherwise (unequal
    :math:`n_i`) this computes the usual generalisation: subjects with fewer than 2 ratings
    are dropped, each remaining :math:`P_i` uses its own :math:`n_i`, and :math:`p_k` pools
    all their ratings; with ``strict=True`` unequal counts raise :class:`InputError`
    instead. NaN when no subject has 2 ratings or all ratings fall in one category.
    """
    N = np.asarray(counts, dtype=float)
    if N.ndim != 2:
        raise InputError(f"counts must be 2-D (subjects x categories), got shape {N.shape}")
    n = N.sum(axis=1)
    if strict and N.shape[0] and np.unique(n).size > 1:
        raise InputError(f"Fleiss' kappa needs equal ratings per subject; counts range from "
                         f"{int(n.min())} to {int(n.max())}")
    N, n = N[n >= 2], n[n >= 2]
    if N.size == 0:
        return float("nan")
    P_i = (np.sum(N ** 2, axis=1) - n) / (n * (n - 1))
    p = N.sum(axis=0) / n.sum()
    P_e = float(np.sum(p ** 2))
    if P_e >= 1.0:
        return float("nan")
    return float((P_i.mean() - P_e) / (1.0 - P_e))


def fleiss_kappa(task: ArrayLike, label: ArrayLike, n_tasks: int | None = None,
                 n_classes: int | None = None, *, strict: bool = False) -> float:
    """Fleiss' kappa of long-format labels; see :func:`fleiss_kappa_counts`."""
    return fleiss_kappa_counts(_counts(task, label, n_tasks, n_classes), strict=strict)


@dataclass
class WorkerAccuracy:
    """Per-worker comparison with a reference: ``n`` labels compared, ``correct`` of them
    equal to the reference, ``accuracy`` = correct / n (NaN where n = 0)."""

    n: IntArray
    correct: IntArray
    accuracy: FloatArray


def worker_accuracy(task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                    reference: ArrayLike, n_workers: int | None = None) -> WorkerAccuracy:
    """Compare every worker's labels with ``reference`` (class index per task; -1 = unknown,
    those labels are skipped). Pass the gold answers for accuracy against gold, or an
    aggregator's ``labels_`` for accuracy against the aggregate."""
    d = check_labels(task, worker, label, None, n_workers, None)
    ref = np.asarray(reference, dtype=np.int64)
    if d.task.size and ref.shape[0] <= d.task.max():
        raise InputError(f"reference has {ref.shape[0]} tasks but labels refer to task "
                         f"{int(d.task.max())}", field="reference")
    r = ref[d.task] if d.task.size else np.empty(0, dtype=np.int64)
    known = r >= 0
    n = np.bincount(d.worker[known], minlength=d.n_workers)
    correct = np.bincount(d.worker[known], weights=(d.label[known] == r[known]).astype(float),
                          minlength=d.n_workers).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n > 0, correct / np.maximum(n, 1), np.nan)
    return WorkerAccuracy(n=n, correct=correct, accuracy=acc)
