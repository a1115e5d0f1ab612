"""Weighted votes shared by the vote-based policies (BBTA, IEThresh, CrowdSense): scores
per class, the expected 0-1 loss of their argmax, the margin and the shares."""

from __future__ import annotations

import numpy as np

__all__ = ["vote_scores", "expected_zero_one_loss", "margin", "shares"]


def vote_scores(labels: np.ndarray, weights: np.ndarray | float, n_classes: int) -> np.ndarray:
    """Weighted label counts: ``scores[i, c] = sum_j weights[i, j] * 1[labels[i, j] == c]``.

    ``labels`` is (n, K) with -1 for a missing label; ``weights`` broadcasts against it."""
    w = np.broadcast_to(weights, labels.shape)
    return np.stack([np.where(labels == c, w, 0.0).sum(axis=1) for c in range(n_classes)],
                    axis=1)


def expected_zero_one_loss(scores: np.ndarray, label: np.ndarray | int) -> np.ndarray:
    """P(argmax with a uniform tie break != label), row-wise over ``scores`` (n, C)."""
    scores = np.atleast_2d(scores)
    label = np.broadcast_to(np.asarray(label), scores.shape[:1])
    top = scores == scores.max(axis=1, keepdims=True)
    hit = top[np.arange(len(label)), label]
    return 1.0 - hit / top.sum(axis=1)


def margin(scores: np.ndarray, total: float | np.ndarray) -> np.ndarray:
    """Confidence: (best - second best) / total weight; |ybar| for two classes."""
    if scores.shape[1] == 1:
        return np.zeros(scores.shape[0])
    if scores.shape[1] == 2:  # max - min, the same float as the sorted difference
        diff = np.abs(scores[:, 1] - scores[:, 0])
    else:
        part = np.sort(scores, axis=1)
        diff = part[:, -1] - part[:, -2]
    total = np.broadcast_to(np.asarray(total, dtype=float), diff.shape)
    out = np.zeros(diff.shape)
    np.divide(diff, total, out=out, where=total > 0)
    return np.nan_to_num(out)


def shares(scores: np.ndarray) -> np.ndarray:
    """Vote shares per row; a row with no weight is uniform."""
    tot = scores.sum(axis=1, keepdims=True)
    out = np.full_like(scores, 1.0 / scores.shape[1])
    np.divide(scores, tot, out=out, where=tot > 0)
    return out
