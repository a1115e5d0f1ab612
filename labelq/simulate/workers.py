"""Simulated annotators as confusion tensors.

Every worker model is one array ``conf[w, s, y, z]``: the probability that worker ``w``
answers class ``z`` on a task of category ``s`` whose true class is ``y``. One-coin,
per-category accuracy, spammer–hammer, malicious and full confusion-matrix workers are all
special cases, so one vectorised sampler serves them all (:meth:`WorkerPool.answer`).

Binary models follow the papers: accuracy ``p`` means "answers the truth with probability p,
the other class otherwise"; with C > 2 classes a wrong answer is uniform over the others.

One model depends on the task as well as on its category and class: **schools of thought**
(``schools``, :class:`SchoolsPool`). A share ``bloc`` of the workers (the majority bloc)
and a share ``decoys`` of the tasks (the decoys) are drawn; everyone answers the truth with
probability ``p`` on an ordinary task; on a decoy the bloc answers one consistent wrong class
(the decoy's own, the same for every bloc member) with probability ``p``, another class at
random otherwise, while the minority answers the truth with probability ``p``. With two
classes, ``bloc=0.6`` and ``p=0.8`` a decoy's label is its wrong class with probability
0.6·0.8 + 0.4·0.2 = 0.56, so the majority vote of many labels is wrong on most decoys. The
decoys are a property of the task set: :meth:`WorkerPool.for_tasks` (called by
:func:`~labelq.simulate.synthetic.make_synthetic` once the truth is drawn, from the run's
environment generator) returns the pool bound to them, and :meth:`WorkerPool.answer` takes
the task index (``tasks=``) the bound pool needs. Every other model ignores both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..policies.base import BoolArray, FloatArray, IntArray

__all__ = ["WorkerPool", "SchoolsPool", "accuracy_tensor", "make_pool", "WORKER_MODELS",
           "POOL_MODELS", "ModelParam"]

#: a worker model's parameter: a number, or a pair (``beta=(a, b)``)
ModelParam: TypeAlias = float | tuple[float, float]


def accuracy_tensor(p: ArrayLike, n_classes: int) -> FloatArray:
    """Confusion tensor (W, S, C, C) from accuracies ``p`` of shape (W, S)."""
    acc = np.asarray(p, dtype=float)
    if acc.ndim != 2:
        raise ValueError(f"accuracies must be (workers, categories), got shape {acc.shape}")
    if np.any((acc < 0) | (acc > 1)):
        raise ValueError("accuracies must lie in [0, 1]")
    eye = np.eye(n_classes)
    off = (1.0 - eye) / max(n_classes - 1, 1)
    out: FloatArray = acc[:, :, None, None] * eye + (1.0 - acc)[:, :, None, None] * off
    return out


@dataclass
class WorkerPool:
    """A set of simulated workers. ``conf`` has shape (W, S, C, C), rows sum to one."""

    conf: FloatArray

    def __post_init__(self) -> None:
        self.conf = np.asarray(self.conf, dtype=float)
        if self.conf.ndim != 4 or self.conf.shape[2] != self.conf.shape[3]:
            raise ValueError(f"conf must be (W, S, C, C), got shape {self.conf.shape}")
        if not np.allclose(self.conf.sum(axis=3), 1.0):
            raise ValueError("each conf[w, s, y, :] must sum to 1")
        self._cdf: FloatArray = np.cumsum(self.conf, axis=3)

    @property
    def n_workers(self) -> int:
        return int(self.conf.shape[0])

    @property
    def n_categories(self) -> int:
        return int(self.conf.shape[1])

    @property
    def n_classes(self) -> int:
        return int(self.conf.shape[2])

    def accuracy(self) -> FloatArray:
        """(W, S) probability of a correct answer, averaged over true classes."""
        out: FloatArray = np.diagonal(self.conf, axis1=2, axis2=3).mean(axis=2)
        return out

    def answer(self, workers: IntArray | int, categories: IntArray | int,
               truths: IntArray | int, rng: np.random.Generator,
               tasks: IntArray | int | None = None) -> IntArray:
        """Sample answers (class indices), vectorised over equally shaped index arrays.
        ``tasks`` (the task indices) matter only to a pool bound to its tasks
        (:meth:`for_tasks`); the confusion-tensor models ignore them."""
        w, s, y = np.broadcast_arrays(np.asarray(workers), np.asarray(categories),
                                      np.asarray(truths))
        cdf = self._cdf[w, s, y]  # (..., C)
        u = rng.random(w.shape)[..., None]
        out: IntArray = np.minimum((u >= cdf).sum(axis=-1), self.n_classes - 1).astype(np.int64)
        return out

    def for_tasks(self, truth: IntArray, rng: np.random.Generator) -> WorkerPool:
        """The pool for a task set with this ``truth`` (int per task). The models whose
        answers depend on the task only through its category and class draw nothing and
        return the pool itself; :class:`SchoolsPool` draws its decoys here."""
        return self


@dataclass
class SchoolsPool(WorkerPool):
    """Schools of thought (module docstring): ``conf`` is everyone's one-coin accuracy ``p``
    on ordinary tasks (and the minority's on decoys); ``bloc[w]`` marks the majority bloc;
    ``decoy_class[i]`` is decoy i's wrong class, -1 on ordinary tasks (``None`` until
    :meth:`for_tasks` has drawn them)."""

    bloc: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    p: float = 0.8
    decoys: float = 0.3
    decoy_class: IntArray | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.bloc = np.asarray(self.bloc, dtype=bool)
        if self.bloc.shape != (self.n_workers,):
            raise ValueError(f"bloc must be one flag per worker ({self.n_workers}), got "
                             f"shape {self.bloc.shape}")

    def for_tasks(self, truth: IntArray, rng: np.random.Generator) -> SchoolsPool:
        """A copy bound to ``round(decoys · n_tasks)`` decoys, drawn among the tasks with a
        truth, each with a wrong class drawn uniformly among the other classes."""
        truth = np.asarray(truth, dtype=np.int64)
        known = np.flatnonzero(truth >= 0)
        chosen = rng.choice(known, size=int(round(self.decoys * known.size)), replace=False)
        decoy = np.full(truth.size, -1, dtype=np.int64)
        shift = rng.integers(1, self.n_classes, size=chosen.size)  # a wrong class
        decoy[chosen] = (truth[chosen] + shift) % self.n_classes
        return SchoolsPool(self.conf, bloc=self.bloc, p=self.p, decoys=self.decoys,
                           decoy_class=decoy)

    def is_decoy(self) -> BoolArray:
        if self.decoy_class is None:
            raise ValueError("the schools pool has no decoys yet: bind it to its tasks with "
                             "for_tasks(truth, rng)")
        out: BoolArray = self.decoy_class >= 0
        return out

    def answer(self, workers: IntArray | int, categories: IntArray | int,
               truths: IntArray | int, rng: np.random.Generator,
               tasks: IntArray | int | None = None) -> IntArray:
        if tasks is None:
            raise ValueError("the schools model answers per task: pass tasks=")
        self.is_decoy()  # bound to its tasks
        assert self.decoy_class is not None
        out = super().answer(workers, categories, truths, rng)
        w, t = np.broadcast_arrays(np.asarray(workers), np.asarray(tasks))
        wrong = self.decoy_class[t]
        swayed = (wrong >= 0) & self.bloc[w]
        if not swayed.any():
            return out
        # the bloc on a decoy: its wrong class with probability p, else another at random
        other = rng.integers(self.n_classes - 1, size=w.shape)
        other = other + (other >= wrong)
        bloc_answer = np.where(rng.random(w.shape) < self.p, wrong, other)
        answers: IntArray = np.where(swayed, bloc_answer, out).astype(np.int64)
        return answers


def _spammer_hammer(n_workers: int, n_categories: int, n_classes: int,
                    rng: np.random.Generator, hammer: float = 0.95,
                    spammer: float | None = None, share: float | None = None) -> FloatArray:
    """BBTA's model: each worker is a hammer (accuracy ``hammer``) on one category and a
    spammer (random answers) on the others. With ``share`` given instead, a share of
    workers are hammers on every category and the rest spammers (Karger/Ho et al.)."""
    spam = 1.0 / n_classes if spammer is None else spammer
    p: FloatArray
    if share is not None:
        is_hammer = rng.random(n_workers) < share
        p = np.where(is_hammer, hammer, spam)[:, None].repeat(n_categories, axis=1)
    else:
        p = np.full((n_workers, n_categories), spam)
        p[np.arange(n_workers), np.arange(n_workers) % n_categories] = hammer
    return p


def _one_coin(n_workers: int, n_categories: int, n_classes: int, rng: np.random.Generator,
              good: float = 0.9, other: float = 0.6, p: float | None = None,
              beta: tuple[float, float] | None = None) -> FloatArray:
    """Per-category one-coin: ``good`` on one category, ``other`` elsewhere (BBTA's model).
    ``p=x`` gives every worker accuracy x; ``beta=(a, b)`` draws accuracies from Beta(a, b)
    (Opt-KG's workers, Beta(4, 1))."""
    acc: FloatArray
    if beta is not None:
        acc = rng.beta(beta[0], beta[1], size=n_workers)[:, None].repeat(n_categories, axis=1)
        return acc
    if p is not None:
        return np.full((n_workers, n_categories), float(p))
    acc = np.full((n_workers, n_categories), other)
    acc[np.arange(n_workers), np.arange(n_workers) % n_categories] = good
    return acc


def _malicious(n_workers: int, n_categories: int, n_classes: int, rng: np.random.Generator,
               good: float = 0.9, bad: float = 0.3, other: float = 0.6) -> FloatArray:
    """BBTA's malicious model: ``good`` on one category, ``bad`` (< chance) on another,
    ``other`` elsewhere."""
    acc = np.full((n_workers, n_categories), other)
    idx = np.arange(n_workers)
    acc[idx, idx % n_categories] = good
    if n_categories > 1:
        acc[idx, (idx + 1) % n_categories] = bad
    return acc


def _uniform_acc(n_workers: int, n_categories: int, n_classes: int, rng: np.random.Generator,
                 low: float = 0.5, high: float = 1.0) -> FloatArray:
    """Accuracy ~ U(low, high), the same on every category (B-KUBE's workers)."""
    acc: FloatArray = rng.uniform(low, high, size=n_workers)[:, None].repeat(n_categories,
                                                                            axis=1)
    return acc


def _schools(n_workers: int, n_categories: int, n_classes: int, rng: np.random.Generator,
             p: float = 0.8, bloc: float = 0.6, decoys: float = 0.3) -> SchoolsPool:
    """Schools of thought (:class:`SchoolsPool`): ``round(bloc · W)`` workers drawn into the
    majority bloc; the decoys are drawn with the tasks (:meth:`SchoolsPool.for_tasks`)."""
    for name, value in (("p", p), ("bloc", bloc), ("decoys", decoys)):
        if not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    members = np.zeros(n_workers, dtype=bool)
    members[rng.choice(n_workers, size=int(round(bloc * n_workers)), replace=False)] = True
    conf = accuracy_tensor(np.full((n_workers, n_categories), float(p)), n_classes)
    return SchoolsPool(conf, bloc=members, p=float(p), decoys=float(decoys))


# models that build their own pool (not an accuracy array); each takes (n_workers,
# n_categories, n_classes, rng) and its own keywords
POOL_MODELS: dict[str, Callable[..., WorkerPool]] = {"schools": _schools}

# models given as (W, S) accuracies
WORKER_MODELS: dict[str, Callable[..., FloatArray]] = {
    "spammer-hammer": _spammer_hammer,
    "one-coin": _one_coin,
    "malicious": _malicious,
    "uniform-accuracy": _uniform_acc,
}


def make_pool(model: str, n_workers: int, n_categories: int, n_classes: int,
              rng: np.random.Generator, **params: ModelParam) -> WorkerPool:
    """Build a named worker model (``spammer-hammer``, ``one-coin``, ``malicious``,
    ``uniform-accuracy``, ``confusion`` with Dirichlet-drawn confusion matrices, or
    ``schools``, whose pool must then be bound to its tasks: :meth:`WorkerPool.for_tasks`)."""
    if model in POOL_MODELS:
        return POOL_MODELS[model](n_workers, n_categories, n_classes, rng, **params)
    if model == "confusion":
        strength = params.get("strength", 4.0)
        if isinstance(strength, tuple):
            raise InputError(f"confusion: strength must be a number, got {strength!r}")
        diag = float(strength)
        alpha = np.ones((n_classes, n_classes)) + (diag - 1.0) * np.eye(n_classes)
        conf = np.stack([rng.dirichlet(alpha[y], size=(n_workers, n_categories))
                         for y in range(n_classes)], axis=2)
        return WorkerPool(conf)
    try:
        factory = WORKER_MODELS[model]
    except KeyError:
        known = ", ".join(sorted([*WORKER_MODELS, *POOL_MODELS, "confusion"]))
        raise InputError(f"unknown worker model {model!r}; known: {known}") from None
    acc = factory(n_workers, n_categories, n_classes, rng, **params)
    return WorkerPool(accuracy_tensor(acc, n_classes))
