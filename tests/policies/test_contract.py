"""The policy contract, checked for EVERY registered policy (``labelq.policies.names()``).

On small random problems (binary and 3-class; categories, costs, capacities, a budget, gold
questions) and random eligibility masks, a policy

* picks only where the mask is True, in pull (``select_task``, also on a candidate subset)
  and push (``select_pair``) mode, and returns ``None`` when nothing is eligible;
* is deterministic for a fixed seed (two runs of 50 decide/update steps choose the same);
* keeps everything in its state: ``state_to_dict`` is JSON-serialisable and, rebuilt with
  ``state_from_dict`` by a fresh policy object half-way, leads to identical decisions;
* answers ``priority`` and ``predict_proba`` with the right shapes and no NaN.

The problems carry a model's predictions (a row of NaN where it gave none) and a share of
the labels arrive marked ``suggested`` (given with the model's answer shown, issue 42): a
policy that weighs them (``auto``) must keep the marks in its state too.

A policy that does not support multi-class problems must say so with ``PolicyError`` from
``init_state`` (the 3-class case is then skipped).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build, names

STEPS = 50


def make_problem(kind: str, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    n_tasks, n_workers = 14, 5
    n_classes = 2 if kind == "binary" else 3
    is_gold = np.zeros(n_tasks, dtype=bool)
    is_gold[rng.choice(n_tasks, 2, replace=False)] = True
    gold_answer = np.where(is_gold, rng.integers(0, n_classes, n_tasks), -1)
    preds = rng.dirichlet(np.ones(n_classes), n_tasks)
    preds[rng.random(n_tasks) < 0.2] = np.nan
    return Problem(
        n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes,
        task_category=rng.integers(0, 2, n_tasks), n_categories=2,
        worker_cost=rng.uniform(0.5, 2.0, n_workers),
        worker_capacity=np.array([-1, 12, 30, -1, 8]),
        budget=60.0, max_labels_per_task=4, is_gold=is_gold, gold_answer=gold_answer,
        predictions={"m": preds},
    )


def play(name: str, problem: Problem, seed: int, roundtrip_at: int | None = None) -> list:
    """STEPS decide/update steps; checks each decision against the mask; returns the choices."""
    policy = build(name)
    env = np.random.default_rng(seed)
    rng = np.random.default_rng(seed + 1000)
    state = policy.init_state(problem)
    T, W, C = problem.n_tasks, problem.n_workers, problem.n_classes
    choices: list = []
    for step in range(STEPS):
        if step == roundtrip_at:
            data = json.loads(json.dumps(policy.state_to_dict(state)))
            policy = build(name)  # a fresh object: everything must live in the state
            state = policy.state_from_dict(data)
        empty = step % 10 == 9
        mask = np.zeros((T, W), bool) if empty else env.random((T, W)) < 0.5
        # pull, over all tasks
        worker = int(env.integers(W))
        task = policy.select_task(state, worker, np.arange(T), mask[:, worker].copy(), rng)
        if not mask[:, worker].any():
            assert task is None, f"{name}: picked task {task} with nothing eligible"
        if task is not None:
            assert mask[task, worker], f"{name}: picked ineligible task {task}"
        # pull, over a shuffled candidate subset
        cand = env.permutation(T)[: T // 2]
        sub_mask = mask[cand, worker].copy()
        sub = policy.select_task(state, worker, cand, sub_mask, rng)
        if not sub_mask.any():
            assert sub is None
        if sub is not None:
            assert sub in set(cand[sub_mask].tolist()), f"{name}: {sub} not an eligible candidate"
        # push
        pair = policy.select_pair(state, mask.copy(), rng)
        if not mask.any():
            assert pair is None, f"{name}: picked pair {pair} with nothing eligible"
        if pair is not None:
            assert mask[pair[0], pair[1]], f"{name}: picked ineligible pair {pair}"
        choices.append((task, sub, None if pair is None else tuple(map(int, pair))))
        # learn from one of the decisions
        chosen = pair if step % 2 and pair is not None else (
            (task, worker) if task is not None else pair)
        if chosen is None:
            continue
        i, j = int(chosen[0]), int(chosen[1])
        declined = env.random() < 0.1
        label = -1 if declined else int(env.integers(C))
        obs = Observation(task=i, worker=j, label=label, gold=bool(problem.is_gold[i]),
                          truth=int(problem.gold_answer[i]), declined=declined,
                          suggested=bool(env.random() < 0.4))
        touched = np.asarray(policy.update(state, obs))
        assert touched.ndim == 1 and np.all((touched >= 0) & (touched < T))
    prio = np.asarray(policy.priority(state, np.arange(T)), dtype=float)
    assert prio.shape == (T,) and not np.isnan(prio).any()
    proba = np.asarray(policy.predict_proba(state))
    assert proba.shape == (T, C) and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    json.dumps(policy.state_to_dict(state))
    return choices


def _supported(name: str, problem: Problem) -> None:
    try:
        build(name).init_state(problem)
    except PolicyError as exc:
        if problem.n_classes > 2:
            pytest.skip(f"{name} does not support {problem.n_classes} classes: {exc}")
        raise


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("name", names())
def test_contract(name, kind):
    problem = make_problem(kind, seed=11)
    _supported(name, problem)
    first = play(name, problem, seed=5)
    assert play(name, problem, seed=5) == first, f"{name} is not deterministic for a seed"
    assert play(name, problem, seed=5, roundtrip_at=STEPS // 2) == first, \
        f"{name}: decisions differ after state_to_dict -> state_from_dict"
    assert any(c != (None, None, None) for c in first)


def test_every_policy_has_a_name_params_and_mode():
    for name in names():
        policy = build(name)
        assert policy.name == name and policy.mode in ("pull", "push")
        assert policy.params is not None


def test_policies_import_no_io_libraries():
    code = ("import sys, labelq.policies\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('redis', 'sqlmodel', 'sqlalchemy', 'celery', 'psycopg')]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"labelq.policies imports {out}"
