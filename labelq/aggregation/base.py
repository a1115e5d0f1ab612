"""The aggregator contract and the array helpers every algorithm shares.

Data contract (stated once, here)
---------------------------------
Every aggregator's ``fit(task, worker, label, *, n_tasks=None, n_workers=None,
n_classes=None, ...)`` takes three equally long integer arrays, one entry per label given:

* ``task[l]``   -- dense task index ``0..n_tasks-1`` of label ``l``;
* ``worker[l]`` -- dense worker index ``0..n_workers-1`` of the worker who gave it;
* ``label[l]``  -- class index ``0..n_classes-1`` the worker answered.

The ``n_*`` sizes default to ``max + 1`` of the arrays; pass them when some tasks have no
label (such tasks get uniform probabilities) or a class was never answered. A worker may
label the same task several times: every label counts (Dawid & Skene's 1979 data does this).
``fit_data(LabelData)`` is the same call fed from :class:`labelq.datasets.LabelData`
(categories and, if asked, gold are taken from it); ``fit_with(task, worker, label, extra)``
takes the method's own keywords (``gold``, ``categories``, ...) as a mapping, for callers
that choose them at run time (:func:`labelq.aggregation.aggregate`).

After ``fit`` every aggregator exposes

* ``labels_``     -- int (n_tasks,), the chosen class index per task;
* ``probas_``     -- float (n_tasks, n_classes), rows sum to 1; uniform for unlabelled tasks;
* ``confidence_`` -- float (n_tasks,), ``probas_[i, labels_[i]]``. A single label never reads
  as certain (every algorithm smooths or has a prior), so it is strictly below 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import InputError
from ..policies.base import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["BaseAggregator", "LabelArrays", "check_labels", "check_gold", "count_matrix",
           "argmax_first", "rank_within_task", "LabelSource", "FloatArray", "IntArray",
           "BoolArray", "Seed"]

#: what an ``rng`` parameter takes: what ``np.random.default_rng`` does (a seed or a Generator)
Seed: TypeAlias = (int | np.random.Generator | np.random.BitGenerator | np.random.SeedSequence
                   | None)


class LabelArrays:
    """Validated label arrays plus their sizes (built by :func:`check_labels`)."""

    __slots__ = ("task", "worker", "label", "n_tasks", "n_workers", "n_classes")

    def __init__(self, task: IntArray, worker: IntArray, label: IntArray, n_tasks: int,
                 n_workers: int, n_classes: int) -> None:
        self.task, self.worker, self.label = task, worker, label
        self.n_tasks, self.n_workers, self.n_classes = n_tasks, n_workers, n_classes


def _as_index(name: str, values: ArrayLike, size: int | None) -> tuple[IntArray, int]:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"{name} must be a 1-D array, got shape {arr.shape}", field=name)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)):
            raise InputError(f"{name} must hold integer indices, got dtype {arr.dtype}",
                             field=name)
    arr = arr.astype(np.int64, copy=False)
    top = int(arr.max()) + 1 if arr.size else 0
    if arr.size and arr.min() < 0:
        bad = int(np.argmin(arr))
        raise InputError(f"{name}[{bad}] = {arr[bad]} is negative", field=name, index=bad)
    if size is None:
        size = top
    elif top > size:
        bad = int(np.argmax(arr))
        raise InputError(f"{name}[{bad}] = {arr[bad]} is out of range for n={size}",
                         field=name, index=bad)
    return arr, int(size)


def check_labels(task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                 n_tasks: int | None = None, n_workers: int | None = None,
                 n_classes: int | None = None) -> LabelArrays:
    """Validate the three label arrays (see the module docstring) and infer sizes."""
    t, n_t = _as_index("task", task, n_tasks)
    w, n_w = _as_index("worker", worker, n_workers)
    y, n_k = _as_index("label", label, n_classes)
    if not (t.size == w.size == y.size):
        raise InputError(f"task, worker and label must have equal length, got "
                         f"{t.size}, {w.size}, {y.size}")
    if n_k < 1:
        raise InputError("no classes: pass n_classes or at least one label", field="label")
    return LabelArrays(t, w, y, n_t, n_w, n_k)


def count_matrix(rows: IntArray, cols: IntArray, n_rows: int, n_cols: int,
                 weights: ArrayLike | None = None) -> sp.csr_matrix:
    """Sparse (n_rows, n_cols) matrix of summed ``weights`` (default 1) at (rows, cols).

    Duplicate pairs are summed, so a worker who labels a task twice counts twice.
    """
    data = np.ones(rows.size) if weights is None else np.asarray(weights, dtype=float)
    m = sp.csr_matrix((data, (rows, cols)), shape=(n_rows, n_cols))
    m.sum_duplicates()
    return m


def rank_within_task(task: IntArray, rng: np.random.Generator) -> IntArray:
    """Per label, its rank (0, 1, ...) among its task's labels taken in a random order:
    ``rank < k`` keeps at most k labels of each task, drawn at random."""
    order = rng.permutation(task.size)
    order = order[np.argsort(task[order], kind="stable")]  # each task's labels, shuffled
    t = task[order]
    start = np.r_[0, np.flatnonzero(np.diff(t)) + 1]
    rank = np.empty(task.size, dtype=np.int64)
    rank[order] = np.arange(t.size) - np.repeat(start, np.diff(np.r_[start, t.size]))
    return rank


def argmax_first(scores: FloatArray) -> IntArray:
    """Row-wise argmax; ties go to the lowest class index (numpy's rule)."""
    out: IntArray = np.argmax(scores, axis=1).astype(np.int64)
    return out


def check_gold(gold: ArrayLike | None, n_tasks: int, n_classes: int) -> IntArray:
    """An int (n_tasks,) array of class index or -1 (unknown); ``None`` means no gold."""
    if gold is None:
        return np.full(n_tasks, -1, dtype=np.int64)
    g = np.asarray(gold).astype(np.int64)
    if g.shape != (n_tasks,):
        raise InputError(f"gold must have shape ({n_tasks},), got {g.shape}", field="gold")
    if g.size and (g.min() < -1 or g.max() >= n_classes):
        bad = int(np.argmax((g < -1) | (g >= n_classes)))
        raise InputError(f"gold[{bad}] = {g[bad]} is not -1 or a class index < {n_classes}",
                         field="gold", index=bad)
    return g


class LabelSource(Protocol):
    """What :meth:`BaseAggregator.fit_data` reads: :class:`labelq.datasets.LabelData`
    (named here by shape, as aggregation sits below the modules that load files)."""

    @property
    def task(self) -> IntArray: ...
    @property
    def worker(self) -> IntArray: ...
    @property
    def label(self) -> IntArray: ...
    @property
    def truth(self) -> IntArray: ...
    @property
    def category(self) -> IntArray: ...
    @property
    def n_tasks(self) -> int: ...
    @property
    def n_workers(self) -> int: ...
    @property
    def n_classes(self) -> int: ...


class BaseAggregator:
    """Base of every aggregator: ``fit``, ``fit_with``, ``fit_data``, ``fit_predict``,
    ``fit_predict_proba`` and the ``labels_`` / ``probas_`` / ``confidence_`` results.

    Subclasses implement ``_fit(d: LabelArrays, **extra)`` which must set ``probas_`` (and
    may set ``labels_``; by default it is the row argmax of ``probas_``, ties to the lowest
    class index). One that takes keyword arguments (``gold``, ``categories``, ...) also
    overrides ``fit`` to name them, and passes them on through :meth:`fit_with`.
    """

    #: keyword arguments of ``fit`` that ``fit_data`` fills from a LabelData
    uses_categories = False
    uses_gold = False

    labels_: IntArray
    probas_: FloatArray
    confidence_: FloatArray

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None) -> Self:
        """Fit on label arrays (see the module docstring); returns ``self``."""
        return self.fit_with(task, worker, label, {}, n_tasks=n_tasks, n_workers=n_workers,
                             n_classes=n_classes)

    def fit_with(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                 extra: Mapping[str, object], *, n_tasks: int | None = None,
                 n_workers: int | None = None, n_classes: int | None = None) -> Self:
        """``fit`` with its method-specific keyword arguments (``gold``, ``categories``,
        ...) in a mapping chosen at run time (:meth:`fit_data`,
        :func:`labelq.aggregation.aggregate`); one this method does not take is a
        ``TypeError``, as in ``fit``."""
        d = check_labels(task, worker, label, n_tasks, n_workers, n_classes)
        vars(self).pop("labels_", None)  # set by _fit, or below: never the last fit's
        self._fit(d, **extra)
        if "labels_" not in vars(self):
            self.labels_ = argmax_first(self.probas_)
        self.confidence_ = self.probas_[np.arange(d.n_tasks), self.labels_]
        return self

    def _fit(self, d: LabelArrays) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit_data(self, data: LabelSource, *, use_gold: bool = False,
                 **extra: object) -> Self:
        """Fit on a :class:`labelq.datasets.LabelData`; its task categories are passed to
        category-aware methods, and its truth as clamped ``gold`` when ``use_gold``."""
        if self.uses_categories and "categories" not in extra:
            extra["categories"] = data.category
        if use_gold and self.uses_gold:
            extra["gold"] = data.truth
        return self.fit_with(data.task, data.worker, data.label, extra, n_tasks=data.n_tasks,
                             n_workers=data.n_workers, n_classes=data.n_classes)

    def fit_predict(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                    **kw: object) -> IntArray:
        """``fit(task, worker, label, **kw).labels_``."""
        # this class's own fit, with the keywords it names
        fit: Callable[..., BaseAggregator] = self.fit
        return fit(task, worker, label, **kw).labels_

    def fit_predict_proba(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                          **kw: object) -> FloatArray:
        """``fit(task, worker, label, **kw).probas_``."""
        fit: Callable[..., BaseAggregator] = self.fit
        return fit(task, worker, label, **kw).probas_

    def __repr__(self) -> str:
        params = {k: v for k, v in vars(self).items() if not k.endswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())})"
