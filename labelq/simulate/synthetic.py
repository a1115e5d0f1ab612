"""Synthetic task sets from a spec string such as
``"tasks=500,categories=4,workers=40,model=spammer-hammer,classes=2"``.

Keys (defaults in brackets):

* ``tasks`` [100], ``workers`` [20], ``categories`` [1], ``classes`` [2] — positive integers
  (``classes`` ≥ 2). Each task's category is uniform over the categories.
* ``model`` [one-coin] — a worker model of :func:`~labelq.simulate.workers.make_pool`;
  its parameters are given as further keys, e.g. ``p=1``, ``beta=4:1`` (a pair ``a:b``),
  ``hammer=0.95``, ``share=0.3``, ``low=0.5``, ``high=1``, ``strength=4``;
  ``model=schools`` takes ``p`` [0.8], ``bloc`` [0.6] and ``decoys`` [0.3] (schools of
  thought, :class:`~labelq.simulate.workers.SchoolsPool`: a majority bloc of workers answers
  one consistent wrong class on the decoy tasks), e.g.
  ``tasks=240,workers=53,classes=2,model=schools,bloc=0.6,decoys=0.3``.
* ``theta`` [none] — ``uniform``: the Opt-KG setting. Task i gets θ_i ~ U(0, 1) (with more
  than two classes θ_i ~ Dirichlet(1, …, 1)); the truth is the most likely class
  (θ_i ≥ 0.5 → class 1) and each label's latent class is drawn from θ_i before the worker
  model applies. ``none``: truth uniform over the classes, workers answer about it.
* ``cost`` [1] — every worker's cost per label, or ``lo:hi`` for costs ~ U(lo, hi).
* ``capacity`` [-1] — labels each worker may give at most (-1 = unlimited).
* ``gold`` [0] — share of tasks that are gold questions (truth known to the policy from
  the start, in its mask like any task: the policy may ask for them whenever it likes;
  exempt from the label cap, left out of the accuracy). ``labelq simulate --gold`` is the
  live way instead: its gold is served by a schedule (:mod:`labelq.simulate.gold`), and
  with it this key's gold tasks are served the same way.

The Opt-KG paper's settings: identical perfect workers over noisy tasks,
``tasks=50,workers=10,model=one-coin,p=1,theta=uniform``; worker reliability ρ ~ Beta(4, 1):
``tasks=50,workers=10,model=one-coin,beta=4:1,theta=uniform``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from .environment import Environment
from .workers import POOL_MODELS, WORKER_MODELS, make_pool

__all__ = ["SyntheticSpec", "make_synthetic"]

_INT_KEYS = {"tasks": 1, "workers": 1, "categories": 1, "classes": 2}
_OTHER_KEYS = ("model", "theta", "cost", "capacity", "gold")
_MODEL_PARAMS = {name: [p for p in inspect.signature(f).parameters][4:]
                 for name, f in {**WORKER_MODELS, **POOL_MODELS}.items()}
_MODEL_PARAMS["confusion"] = ["strength"]


def _number(key: str, text: str) -> float | tuple[float, float]:
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"synthetic spec: {key} must be a number or a pair a:b, "
                         f"got {text!r}") from None
    if len(values) == 1:
        return values[0]
    if len(values) == 2:
        return (values[0], values[1])
    raise InputError(f"synthetic spec: {key} must be a number or a pair a:b, got {text!r}")


@dataclass(frozen=True)
class SyntheticSpec:
    tasks: int = 100
    workers: int = 20
    categories: int = 1
    classes: int = 2
    model: str = "one-coin"
    theta: str = "none"
    cost: float | tuple[float, float] = 1.0
    capacity: int = -1
    gold: float = 0.0
    model_params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> SyntheticSpec:
        """Parse ``key=value,key=value``; raises :class:`InputError` naming the bad key."""
        values: dict[str, Any] = {}
        params: dict[str, Any] = {}
        raw: dict[str, str] = {}
        for item in (s.strip() for s in text.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise InputError(f"synthetic spec: expected key=value, got {item!r}")
            if key in raw:
                raise InputError(f"synthetic spec: {key} given twice")
            raw[key] = value
        model = raw.pop("model", "one-coin")
        if model not in _MODEL_PARAMS:
            raise InputError(f"synthetic spec: unknown model {model!r}; known: "
                             f"{', '.join(sorted(_MODEL_PARAMS))}")
        values["model"] = model
        for key, value in raw.items():
            if key in _INT_KEYS:
                try:
                    n = int(value)
                except ValueError:
                    n = None
                if n is None or n < _INT_KEYS[key]:
                    raise InputError(f"synthetic spec: {key} must be an integer >= "
                                     f"{_INT_KEYS[key]}, got {value!r}")
                values[key] = n
            elif key == "theta":
                if value not in ("uniform", "none"):
                    raise InputError(f"synthetic spec: theta must be 'uniform' or 'none', "
                                     f"got {value!r}")
                values[key] = value
            elif key == "cost":
                cost = _number(key, value)
                lo = cost if isinstance(cost, float) else min(cost)
                if lo <= 0 or (isinstance(cost, tuple) and cost[0] > cost[1]):
                    raise InputError(f"synthetic spec: cost must be > 0 (or lo:hi with "
                                     f"0 < lo <= hi), got {value!r}")
                values[key] = cost
            elif key == "capacity":
                try:
                    cap = int(value)
                except ValueError:
                    cap = 0
                if cap == 0 or cap < -1:
                    raise InputError(f"synthetic spec: capacity must be a positive integer "
                                     f"or -1 (unlimited), got {value!r}")
                values[key] = cap
            elif key == "gold":
                g = _number(key, value)
                if not isinstance(g, float) or not 0 <= g < 1:
                    raise InputError(f"synthetic spec: gold must be a share in [0, 1), "
                                     f"got {value!r}")
                values[key] = g
            elif key in _MODEL_PARAMS[model]:
                params[key] = _number(key, value)
            else:
                known = [*_INT_KEYS, *_OTHER_KEYS]
                raise InputError(
                    f"synthetic spec: unknown key {key!r}; known: {', '.join(known)}; "
                    f"model {model} takes: {', '.join(_MODEL_PARAMS[model]) or 'nothing'}")
        return cls(model_params=params, **values)

    def __str__(self) -> str:
        def fmt(v: Any) -> str:
            return ":".join(f"{x:g}" for x in v) if isinstance(v, tuple) else (
                f"{v:g}" if isinstance(v, float) else str(v))
        parts = [f"tasks={self.tasks}", f"workers={self.workers}",
                 f"categories={self.categories}", f"classes={self.classes}",
                 f"model={self.model}", f"theta={self.theta}", f"cost={fmt(self.cost)}",
                 f"capacity={self.capacity}", f"gold={fmt(self.gold)}"]
        parts += [f"{k}={fmt(v)}" for k, v in sorted(self.model_params.items())]
        return ",".join(parts)


def make_synthetic(spec: SyntheticSpec | str, rng: np.random.Generator) -> Environment:
    """Draw one task set and worker pool from ``spec``."""
    if isinstance(spec, str):
        spec = SyntheticSpec.parse(spec)
    K, W, S, C = spec.tasks, spec.workers, spec.categories, spec.classes
    category = rng.integers(S, size=K)
    theta = None
    if spec.theta == "uniform":
        if C == 2:
            t = rng.random(K)
            theta = np.stack([1.0 - t, t], axis=1)
        else:
            theta = rng.dirichlet(np.ones(C), size=K)
        truth = theta.argmax(axis=1)
    else:
        truth = rng.integers(C, size=K)
    try:
        pool = make_pool(spec.model, W, S, C, rng, **spec.model_params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"synthetic spec: model {spec.model}: {exc}") from exc
    if isinstance(spec.cost, tuple):
        cost = rng.uniform(spec.cost[0], spec.cost[1], size=W)
    else:
        cost = np.full(W, float(spec.cost))
    is_gold = np.zeros(K, dtype=bool)
    n_gold = int(round(spec.gold * K))
    if n_gold:
        is_gold[rng.choice(K, size=n_gold, replace=False)] = True
    pool = pool.for_tasks(truth, rng)  # schools: its decoys (other models draw nothing)
    return Environment(truth=truth, n_workers=W, n_classes=C, task_category=category,
                       n_categories=S, worker_cost=cost,
                       worker_capacity=np.full(W, spec.capacity, dtype=np.int64),
                       is_gold=is_gold, pool=pool, theta=theta, name=f"synthetic({spec})")
