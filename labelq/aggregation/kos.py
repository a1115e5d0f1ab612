"""KOS: Karger-Oh-Shah iterative message passing for binary labels."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .base import BaseAggregator, FloatArray, IntArray, LabelArrays, Seed

__all__ = ["KOS"]


class KOS(BaseAggregator):
    r"""Karger, Oh & Shah (2011), *Iterative learning for reliable crowdsourcing systems*
    (NIPS 24). Binary only: class 0 is :math:`-1`, class 1 is :math:`+1`.

    Messages live on the edges (one per label :math:`A_{ij} \in \{\pm 1\}`):

    .. math::
        x_{i\to j} = \sum_{j' \in \partial i \setminus j} A_{ij'}\, y_{j'\to i}, \qquad
        y_{j\to i} = \sum_{i' \in \partial j \setminus i} A_{i'j}\, x_{i'\to j},

    starting from :math:`y_{j\to i} \sim N(1, 1)` (seeded by ``rng``). After ``n_iter``
    rounds :math:`\hat x_i = \sum_j A_{ij} y_{j\to i}` and :math:`\hat y_i = \mathrm{sign}
    (\hat x_i)`. Each "sum over all but one" is a full sum (``bincount``) minus the edge's
    own term, so a round is O(labels). Messages are rescaled to unit RMS each round (only
    signs matter; this avoids overflow). A worker labelling a task twice gives two edges.

    ``degree_normalized=True`` (default) divides each message by the number of terms it
    sums (degree - 1). On the paper's regular graphs that is a constant factor and changes
    nothing; on real, irregular data (a few workers give hundreds of labels) the plain sums
    let those workers dominate and accuracy drifts toward 0.5 as rounds go on (rte: 0.50
    after 20 rounds plain, 0.92 normalised). ``False`` gives the paper's exact update.

    KOS has no probabilistic model, so ``probas_`` is a monotone squashing of the score,
    :math:`p_{i1} = \sigma(\hat x_i / m)` with :math:`m` the mean :math:`|\hat x_i|` over
    labelled tasks -- a ranking, not a calibrated posterior. A task with score 0 (no labels,
    or a perfect tie) gets (0.5, 0.5) and class 0.
    """

    #: learned: each task's score :math:`\hat x_i` (n_tasks,)
    scores_: FloatArray

    def __init__(self, n_iter: int = 20, degree_normalized: bool = True,
                 rng: Seed = 0) -> None:
        if n_iter < 1:
            raise InputError(f"n_iter must be >= 1, got {n_iter}", field="n_iter")
        self.n_iter, self.degree_normalized, self.rng = n_iter, degree_normalized, rng

    def _fit(self, d: LabelArrays) -> None:
        if d.n_classes != 2:
            raise InputError(f"KOS is for binary labels, got n_classes={d.n_classes}",
                             field="label")
        gen = np.random.default_rng(self.rng)
        t, w = d.task, d.worker
        A = np.where(d.label == 1, 1.0, -1.0)
        y_msg = gen.normal(1.0, 1.0, size=t.size)
        div_x: IntArray | float
        div_y: IntArray | float
        if self.degree_normalized:
            div_x = np.maximum(np.bincount(t, minlength=d.n_tasks)[t] - 1, 1)
            div_y = np.maximum(np.bincount(w, minlength=d.n_workers)[w] - 1, 1)
        else:
            div_x = div_y = 1.0
        # (no label at all, e.g. a project before its first: no message to pass, and the
        # mean of none would be a NaN with a RuntimeWarning; every score stays 0)
        for _ in range(self.n_iter if t.size else 0):
            ay = A * y_msg
            x_msg = (np.bincount(t, ay, minlength=d.n_tasks)[t] - ay) / div_x
            x_msg /= max(np.sqrt(np.mean(x_msg ** 2)), 1e-300)
            ax = A * x_msg
            y_msg = (np.bincount(w, ax, minlength=d.n_workers)[w] - ax) / div_y
            y_msg /= max(np.sqrt(np.mean(y_msg ** 2)), 1e-300)
        # float64 (weighted bincount; numpy's stubs say intp)
        score = np.asarray(np.bincount(t, A * y_msg, minlength=d.n_tasks), dtype=np.float64)
        labelled = np.bincount(t, minlength=d.n_tasks) > 0
        scale = np.abs(score[labelled]).mean() if labelled.any() else 1.0
        scale = scale if scale > 0 else 1.0
        p1 = 1.0 / (1.0 + np.exp(-np.clip(score / scale, -500, 500)))
        self.scores_ = score
        self.probas_ = np.column_stack([1.0 - p1, p1])
        self.labels_ = (score > 0).astype(np.int64)
