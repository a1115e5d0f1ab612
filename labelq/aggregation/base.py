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

Models' predictions (issue 42): ``fit_with`` (and so :func:`labelq.aggregation.aggregate`,
and ``fit`` of ``shrunk`` and ``auto``) takes ``predictions`` — source name (model name and
version) -> float (n_tasks, n_classes) probabilities, classes in the label set's order, a
row of NaN where that model gave none. Each model is then one more source whose answers'
meaning is measured (:mod:`labelq.policies._model_source`): ``shrunk`` learns it in its own
EM beside the annotators; every other method's posterior from the labels is combined with
it afterwards. The result then also has ``source_`` (per task ``humans``,
``humans+model``, ``model`` or ``none``: what its answer rests on) and ``model_accuracy_``
(source name -> :class:`~labelq.policies._model_source.ModelAccuracy`, the measured
accuracy per class with a 95 % interval and the answers it rests on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import InputError
from ..policies._model_source import ModelAccuracy, build_sources, combine, source_of
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


def rank_within_task(task: IntArray, rng: np.random.Generator,
                     weight: FloatArray | None = None) -> IntArray:
    """Per label, its rank (0, 1, ...) among its task's labels taken in a random order:
    ``rank < k`` keeps at most k labels of each task, drawn at random. With ``weight`` (one
    per label, >= 0) the order is a weighted draw without replacement (Efraimidis and
    Spirakis' keys log(u) / w, largest first): a label of weight 0 comes after every other
    of its task."""
    if weight is None:
        order = rng.permutation(task.size)
        order = order[np.argsort(task[order], kind="stable")]  # each task's labels, shuffled
    else:
        w = np.asarray(weight, dtype=float)
        with np.errstate(divide="ignore"):
            key = np.where(w > 0, np.log(rng.random(task.size)) / np.where(w > 0, w, 1.0),
                           -np.inf)
        order = np.lexsort((rng.random(task.size), -key, task))  # ties (weight 0) at random
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
    #: True when ``fit`` takes ``calibration`` (the gold answers that may calibrate)
    uses_calibration = False

    #: True when ``_fit`` takes ``predictions`` itself (else they are combined afterwards)
    uses_predictions = False
    #: True when ``_fit`` takes ``suggested`` (bool per label: given with the model's answer
    #: shown) itself; else only the combination with the models reads it (issue 42)
    uses_suggested = False

    labels_: IntArray
    probas_: FloatArray
    confidence_: FloatArray
    source_: list[str]
    model_accuracy_: dict[str, ModelAccuracy]

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays (see the module docstring); returns ``self``."""
        return self.fit_with(task, worker, label, {"predictions": predictions},
                             n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes)

    def fit_with(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike,
                 extra: Mapping[str, object], *, n_tasks: int | None = None,
                 n_workers: int | None = None, n_classes: int | None = None) -> Self:
        """``fit`` with its method-specific keyword arguments (``gold``, ``categories``,
        ...) in a mapping chosen at run time (:meth:`fit_data`,
        :func:`labelq.aggregation.aggregate`); one this method does not take is a
        ``TypeError``, as in ``fit``."""
        d = check_labels(task, worker, label, n_tasks, n_workers, n_classes)
        for name in ("labels_", "source_", "model_accuracy_"):
            vars(self).pop(name, None)  # set by _fit, or below: never the last fit's
        extra = dict(extra)
        predictions = cast("Mapping[str, FloatArray] | None", extra.pop("predictions", None))
        suggested = cast("ArrayLike | None", extra.pop("suggested", None))
        if predictions and self.uses_predictions:
            extra["predictions"] = predictions
            if self.uses_suggested and suggested is not None:
                extra["suggested"] = suggested
        self._fit(d, **extra)
        gold = cast("ArrayLike | None", extra.get("gold"))
        if predictions and not self.uses_predictions:
            self._combine(d, predictions, gold, cast("ArrayLike | None",
                                                     extra.get("categories")), suggested)
        if "labels_" not in vars(self):
            self.labels_ = argmax_first(self.probas_)
        self.confidence_ = self.probas_[np.arange(d.n_tasks), self.labels_]
        if predictions and "source_" not in vars(self):
            has = build_sources(predictions, d.n_tasks, d.n_classes).has_prediction()
            g = None if gold is None else np.asarray(gold)
            self.source_ = source_of(np.bincount(d.task, minlength=d.n_tasks), has, g)
        return self

    def _label_posterior(self, d: LabelArrays) -> FloatArray:
        """The posterior from the labels that the models' evidence is combined with: the
        method's ``probas_`` (a vote overrides it with a posterior, as its shares are not
        one)."""
        return self.probas_

    def _combine(self, d: LabelArrays, predictions: Mapping[str, FloatArray],
                 gold: ArrayLike | None, categories: ArrayLike | None,
                 suggested: ArrayLike | None = None) -> None:
        """This method's posterior from the labels, with the models' measured evidence
        (:func:`labelq.policies._model_source.combine`); sets ``probas_``, ``labels_``
        (their argmax), ``model_accuracy_``. A label given with the model's answer shown
        and agreeing with it (``suggested``) does not teach the models' tables: its task
        does only through its other labels or gold (docs/models.md, "Independence")."""
        g = check_gold(gold, d.n_tasks, d.n_classes)
        cat = (np.zeros(d.n_tasks, np.int64) if categories is None
               else np.asarray(categories, np.int64))
        S = int(cat.max()) + 1 if cat.size else 1
        src = build_sources(predictions, d.n_tasks, d.n_classes, S)
        labelled = np.bincount(d.task, minlength=d.n_tasks) > 0
        indep = labelled
        if suggested is not None:
            from ..policies.worker_model import copied_labels

            copied = copied_labels(src, d.task, d.label, np.asarray(suggested, bool))
            indep = np.bincount(d.task[~copied], minlength=d.n_tasks) > 0
        human = np.array(self._label_posterior(d), dtype=float)
        if labelled.any():  # a task without labels: the class shares of the labelled ones,
            # half-way to uniform (as auto's worker model), not the method's uniform row
            shares = human[labelled].sum(axis=0) + 1.0
            human[~labelled] = 0.5 * shares / shares.sum() + 0.5 / d.n_classes
        self.probas_ = combine(src, human, indep | (g >= 0), cat, g)
        self.labels_ = argmax_first(self.probas_)
        self.model_accuracy_ = src.accuracy()

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
