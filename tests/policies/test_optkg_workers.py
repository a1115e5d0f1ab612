"""optkg-workers: one-coin reliability, push/pull decisions, gold, caps."""

from __future__ import annotations

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, _beta, build


@pytest.fixture
def policy():
    return build("optkg-workers")


def test_prior_and_priority_under_prior_mean_worker(policy):
    state = policy.init_state(Problem(n_tasks=3, n_workers=2))
    assert state.c.tolist() == [4.0, 4.0] and state.d.tolist() == [1.0, 1.0]
    np.testing.assert_allclose(policy.priority(state, np.arange(3)), 0.142102489517, atol=1e-11)
    custom = build("optkg-workers:c0=9,d0=1")
    assert custom.init_state(Problem(n_tasks=1, n_workers=1)).c[0] == 9.0


def test_multiclass_has_a_dirichlet_state_and_refit_stays_binary(policy):
    """Issue 20: more than two classes run (Dirichlet tasks, tests in
    test_optkg_workers_multiclass.py); only the binary batch refit refuses them."""
    state = policy.init_state(Problem(n_tasks=3, n_workers=2, n_classes=3))
    assert state.alpha.shape == (3, 3) and state.c.tolist() == [4.0, 4.0]
    with pytest.raises(PolicyError, match="refit is binary only"):
        build("optkg-workers:refit=5").init_state(Problem(n_tasks=3, n_workers=2, n_classes=3))


def test_pull_uses_the_asking_workers_reliability(policy):
    state = policy.init_state(Problem(n_tasks=3, n_workers=2))
    state.a[:] = [1.0, 6.0, 3.0]
    state.b[:] = [1.0, 2.0, 3.5]
    state.c[:] = [40.0, 2.0]
    state.d[:] = [1.0, 2.0]
    tasks = np.arange(3)
    for worker in (0, 1):
        expected = np.maximum(*_beta.worker_rewards(state.a, state.b, state.c[worker],
                                                    state.d[worker]))
        np.testing.assert_allclose(policy.score(state, tasks, worker), expected)
        choice = policy.select_task(state, worker, tasks, np.ones(3, bool), None)
        assert choice == int(np.argmax(expected))


def test_push_is_argmax_over_eligible_pairs(policy):
    rng = np.random.default_rng(0)
    state = policy.init_state(Problem(n_tasks=6, n_workers=4))
    state.a[:] = rng.uniform(1, 6, 6)
    state.b[:] = rng.uniform(1, 6, 6)
    state.c[:] = rng.uniform(1, 10, 4)
    state.d[:] = rng.uniform(0.5, 5, 4)
    mask = rng.random((6, 4)) < 0.5
    full = np.maximum(*_beta.worker_rewards(state.a[:, None], state.b[:, None],
                                            state.c[None, :], state.d[None, :]))
    full[~mask] = -np.inf
    assert policy.select_pair(state, mask, rng) == np.unravel_index(np.argmax(full), full.shape)
    assert policy.select_pair(state, np.zeros((6, 4), bool), rng) is None


def test_update_moment_matches_and_reports_the_task(policy):
    state = policy.init_state(Problem(n_tasks=2, n_workers=1))
    state.a[1] = 2.0
    assert list(policy.update(state, Observation(task=1, worker=0, label=1))) == [1]
    np.testing.assert_allclose([state.a[1], state.b[1], state.c[0], state.d[0]],
                               [2.4931506849, 0.9589041096, 4.3278688525, 0.9836065574], rtol=1e-9)
    before = policy.state_to_dict(state)
    assert len(policy.update(state, Observation(task=0, worker=0, label=-1, declined=True))) == 0
    assert policy.state_to_dict(state) == before


def test_gold_updates_only_the_worker_exactly(policy):
    state = policy.init_state(Problem(n_tasks=2, n_workers=2))
    touched = policy.update(state, Observation(task=0, worker=1, label=1, gold=True, truth=1))
    assert len(touched) == 0
    assert (state.a[0], state.b[0]) == (1.0, 1.0)
    assert (state.c[1], state.d[1]) == (5.0, 1.0)
    policy.update(state, Observation(task=0, worker=1, label=0, gold=True, truth=1))
    assert (state.c[1], state.d[1]) == (5.0, 2.0)


def test_worker_strength_is_capped(policy):
    capped = build("optkg-workers:max_strength=20")
    state = capped.init_state(Problem(n_tasks=1, n_workers=1))
    for _ in range(40):
        capped.update(state, Observation(task=0, worker=0, label=1, gold=True, truth=1))
    assert state.c[0] + state.d[0] == pytest.approx(20.0)
    assert state.c[0] / (state.c[0] + state.d[0]) > 0.95
    for _ in range(30):  # still learns after reaching the cap
        capped.update(state, Observation(task=0, worker=0, label=0, gold=True, truth=1))
    assert state.c[0] / (state.c[0] + state.d[0]) < 0.5


def test_learns_reliable_and_adversarial_workers(policy):
    rng = np.random.default_rng(3)
    n, truth = 60, rng.integers(0, 2, 60)
    state = policy.init_state(Problem(n_tasks=n, n_workers=2))
    accuracy = [0.95, 0.3]
    for _ in range(6):
        for i in range(n):
            for j in range(2):
                label = truth[i] if rng.random() < accuracy[j] else 1 - truth[i]
                policy.update(state, Observation(task=i, worker=j, label=int(label)))
    rho = state.c / (state.c + state.d)
    assert rho[0] > 0.85 and rho[1] < 0.5
    assert np.mean(policy.predict(state) == truth) > 0.9
    proba = policy.predict_proba(state)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def _drive_push(policy, T, W, steps, seed, check):
    """Run ``steps`` push decisions on a random availability mask with simulated one-coin
    workers; ``check(state, mask, choice)`` is called before every update."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, T)
    accuracy = rng.uniform(0.3, 0.98, W)
    state = policy.init_state(Problem(n_tasks=T, n_workers=W))
    mask = rng.random((T, W)) < 0.6
    choices = []
    for _ in range(steps):
        choice = policy.select_pair(state, mask, rng)
        check(state, mask, choice)
        if choice is None:
            break
        i, j = choice
        label = truth[i] if rng.random() < accuracy[j] else 1 - truth[i]
        policy.update(state, Observation(task=i, worker=j, label=int(label)))
        mask[i, j] = False
        choices.append(choice)
    return state, choices


def test_push_cache_decisions_equal_the_full_recomputation(policy):
    T, W = 40, 12

    def same_as_full(state, mask, choice):
        assert choice == policy.select_pair_full(state, mask)

    state, choices = _drive_push(policy, T, W, 250, seed=11, check=same_as_full)
    assert len(choices) == 250 and len(set(choices)) == 250
    # incremental: after the first full matrix, one row and one column per label
    cells = state.reward_cache.cells_computed
    assert cells <= T * W + 249 * (T + W), cells
    assert cells < 250 * T * W / 5
    # the cache is refreshed lazily, at the next decision; then it equals a fresh matrix
    fresh = policy.rewards(state.a[:, None], state.b[:, None], state.c[None, :], state.d[None, :])
    assert not np.array_equal(state.reward_cache.r, fresh)  # stale after the last update
    np.testing.assert_array_equal(state.reward_cache.refresh(state), fresh)


def test_push_cache_follows_edits_and_is_not_serialised(policy):
    import json

    state, _ = _drive_push(policy, 15, 6, 30, seed=4, check=lambda *_: None)
    assert state.reward_cache is not None
    data = policy.state_to_dict(state)
    assert sorted(data) == ["a", "b", "c", "d"]
    json.dumps(data)
    mask = np.ones((15, 6), bool)
    rebuilt = policy.state_from_dict(data)
    assert rebuilt.reward_cache is None
    assert policy.select_pair(rebuilt, mask, None) == policy.select_pair(state, mask, None)
    # edits made behind the policy's back are picked up (task 7 made maximally uncertain,
    # worker 2 made very reliable)
    state.a[7], state.b[7] = 1.0, 1.0
    state.c[2], state.d[2] = 60.0, 1.0
    assert policy.select_pair(state, mask, None) == policy.select_pair_full(state, mask) == (7, 2)


def test_random_ties_option():
    policy = build("optkg-workers:random_ties=true")
    assert policy.params.random_ties and not build("optkg-workers").params.random_ties
    state = policy.init_state(Problem(n_tasks=5, n_workers=3))
    mask = np.ones((5, 3), bool)
    mask[0, 0] = False
    # at the prior every eligible pair ties: the default takes the lowest, random_ties any
    assert build("optkg-workers").select_pair(state, mask, np.random.default_rng(0)) == (0, 1)
    rng = np.random.default_rng(1)
    picks = {policy.select_pair(state, mask, rng) for _ in range(200)}
    assert len(picks) == 14 and (0, 0) not in picks
    tasks = {policy.select_task(state, 2, np.arange(5), np.ones(5, bool), rng) for _ in range(100)}
    assert tasks == set(range(5))
    # a strictly better worker is always taken; the tie among tasks stays random
    state.c[2], state.d[2] = 50.0, 1.0
    picks = {policy.select_pair(state, mask, rng) for _ in range(100)}
    assert {w for _, w in picks} == {2} and len(picks) == 5
    with pytest.raises(PolicyError):
        build("optkg-workers:random_ties=3")


# --- batch variational fit (``refit``) ---------------------------------------------------

def _one_coin_labels(seed, T=80, accuracy=(0.95, 0.9, 0.85, 0.5, 0.2), per_task=3):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, T)
    task, worker, label = [], [], []
    for i in range(T):
        for j in rng.choice(len(accuracy), per_task, replace=False):
            task.append(i)
            worker.append(j)
            label.append(truth[i] if rng.random() < accuracy[j] else 1 - truth[i])
    return truth, np.array(task), np.array(worker), np.array(label)


def test_onecoin_vb_recovers_workers_and_labels():
    # every worker labels every task (with 3 of 5 per task the model can absorb a spammer's
    # labels into the tasks' soft labels theta and rate the spammer reliable)
    truth, t, w, lab = _one_coin_labels(5, per_task=5)
    a, b, c, d = _beta.onecoin_vb(t, w, lab, truth.size, 5)
    rho = c / (c + d)
    assert rho[0] > 0.85 and rho[4] < 0.35 and abs(rho[3] - 0.5) < 0.2
    assert np.mean((a > b) == truth) >= 0.95
    # counts add up: every label is one pseudo-observation for its task and its worker
    np.testing.assert_allclose(a + b, 2.0 + np.bincount(t, minlength=truth.size))
    np.testing.assert_allclose(c + d, 5.0 + np.bincount(w, minlength=5))


def test_onecoin_vb_symmetries_and_gold():
    truth, t, w, lab = _one_coin_labels(6)
    a, b, c, d = _beta.onecoin_vb(t, w, lab, truth.size, 5)
    a2, b2, c2, d2 = _beta.onecoin_vb(t, w, 1 - lab, truth.size, 5)  # flipping every label
    np.testing.assert_allclose([a2, b2], [b, a], atol=1e-7)  # mirrors the tasks ...
    np.testing.assert_allclose([c2, d2], [c, d], atol=1e-7)  # ... and keeps the workers
    # Beta(1, 1) workers: c = d is a fixed point, nothing moves (as in worker_update)
    a1, b1, _, _ = _beta.onecoin_vb(t, w, lab, truth.size, 5, c0=1.0, d0=1.0)
    np.testing.assert_allclose(a1, b1)
    # a gold label counts for its worker only, exactly: Y = truth
    g = _beta.onecoin_vb([0, 0], [0, 1], [1, 0], 2, 2, gold_truth=[1, 1])
    np.testing.assert_allclose(np.concatenate(g), [1, 1, 1, 1, 5, 4, 1, 2])
    assert _beta.onecoin_vb([], [], [], 2, 1)[0].tolist() == [1.0, 1.0]  # no labels: priors


def test_refit_option_state_and_predictions():
    plain, refit = build("optkg-workers"), build("optkg-workers:refit=7")
    assert plain.params.refit == 0 and refit.params.refit == 7
    for bad in ("refit=-1", "refit=0.5", "refit=true"):
        with pytest.raises(PolicyError):
            build(f"optkg-workers:{bad}")
    truth, t, w, lab = _one_coin_labels(7, T=30)
    problem = Problem(n_tasks=30, n_workers=5)
    s_plain, s_refit = plain.init_state(problem), refit.init_state(problem)
    assert s_plain.log is None and s_refit.log == []
    for k, (i, j, y) in enumerate(zip(t, w, lab, strict=True)):
        obs = Observation(task=int(i), worker=int(j), label=int(y))
        plain.update(s_plain, obs)
        touched = refit.update(s_refit, obs)
        if (k + 1) % 7 == 0:  # refitted: the state is the batch fit, every task touched
            assert touched.size == 30
            fit = _beta.onecoin_vb(t[:k + 1], w[:k + 1], lab[:k + 1], 30, 5)
            np.testing.assert_allclose(np.concatenate([s_refit.a, s_refit.b, s_refit.c,
                                                       s_refit.d]), np.concatenate(fit))
        else:
            assert touched.tolist() == [int(i)]
    # the prediction is always the batch fit over every label seen (t.size % 7 != 0 here)
    assert t.size % 7
    a, b, _, _ = _beta.onecoin_vb(t, w, lab, 30, 5)
    np.testing.assert_array_equal(refit.predict(s_refit), (a >= b).astype(int))
    np.testing.assert_allclose(refit.predict_proba(s_refit)[:, 1], _beta.prob_positive(a, b)[0])
    # the log is part of the serialised state (JSON), the default state is unchanged
    import json
    data = json.loads(json.dumps(refit.state_to_dict(s_refit)))
    assert len(data["log"]) == t.size and "log" not in plain.state_to_dict(s_plain)
    back = refit.state_from_dict(data)
    assert back.log == s_refit.log
    np.testing.assert_array_equal(refit.predict_proba(back), refit.predict_proba(s_refit))
