"""Rangi & Franceschetti (2018) §6 at reduced size (T = 50, sets A and B, B in {100, 300},
30 runs, fixed seed): the orderings, checked as they stand.

The full-size tables (100 runs, T in {50, 100}, B = 100…300) and the cell-by-cell verdict are
in ``docs/reproductions/bkube.md``. What holds robustly, and is asserted strictly here:

* B-KUBE completes more tasks than bounded ε-first when both use the same moving-on rule
  (``allocation=sequential``, the default), and far more than ε-first, with lower error than
  ε-first;
* against the literal "single step" baselines (``allocation=single-step``: labels spread over
  all T tasks, no moving-on rule) B-KUBE's error is far lower — but those baselines perform
  every one of the T tasks, so B-KUBE cannot complete as many (asserted too: it is why that
  reading cannot be the paper's count of "tasks performed").

The paper's error ordering against bounded ε-first does *not* hold in set B at large budgets
(cheap spammers keep a large confidence bonus per cost); that claim is a strict xfail, so the
test suite notices if it ever starts to hold. Also here: set B's spammers sit at random
positions, the ``--estimates`` replay scores labels exactly as the policy does, and the
diagnosis (at-label v̂ overrates spammers; the knapsack order puts low-value workers first).
"""

from __future__ import annotations

import numpy as np
import pytest

from labelq.reproductions.bkube import make_instance, run_grid, run_policy

BEF = "bounded-eps-first:eps=0.1"
BEF_SS = "bounded-eps-first:eps=0.1,allocation=single-step"
EPSF = "eps-first:eps=0.1"
POLICIES = ["bkube", BEF, BEF_SS, EPSF]
BUDGETS = [100, 300]


@pytest.fixture(scope="module", params=["A", "B"])
def grid(request):
    return request.param, run_grid(50, request.param, BUDGETS, POLICIES, runs=30, seed=11)


@pytest.mark.parametrize("spec", POLICIES + ["trailsourcing", "bkube:agreement=current"])
@pytest.mark.parametrize("wset", ["A", "B"])
def test_every_run_stays_within_budget_and_capacity(spec, wset):
    for r in range(3):
        inst = make_instance(50, wset, np.random.default_rng([5, r]))
        for repeat in (True, False):
            out = run_policy(spec, inst, 120.0, np.random.default_rng(r), repeat=repeat)
            assert out["spent"] <= 120.0 + 1e-9
            assert 0 <= out["completed"] <= 50
            # no capacity check needed here: run_policy raises on an ineligible pick


def test_set_b_has_five_spammers():
    inst = make_instance(50, "B", np.random.default_rng(0))
    assert np.sum(inst.p == 0.5) == 5 and np.all(inst.capacity == 30)
    assert np.all((inst.cost >= 2 * inst.p - 1) & (inst.cost <= 2 * inst.p))


@pytest.mark.parametrize("budget", BUDGETS)
def test_bkube_completes_more_tasks_than_bounded_eps_first(grid, budget):
    _, g = grid
    assert g[(budget, "bkube")]["completed"] > g[(budget, BEF)]["completed"]


@pytest.mark.parametrize("budget", BUDGETS)
def test_eps_first_completes_far_fewer_tasks_with_higher_error(grid, budget):
    """ε-first exploits one worker up to its capacity 0.6T, so it stops early (paper §6)."""
    _, g = grid
    assert g[(budget, EPSF)]["completed"] < 0.5 * g[(budget, "bkube")]["completed"]
    assert g[(budget, EPSF)]["completed"] < 0.5 * g[(budget, BEF)]["completed"]
    assert g[(budget, "bkube")]["error"] < g[(budget, EPSF)]["error"]


@pytest.mark.parametrize("budget", BUDGETS)
def test_single_step_baseline_has_much_higher_error_but_performs_all_tasks(grid, budget):
    _, g = grid
    assert g[(budget, "bkube")]["error"] < g[(budget, BEF_SS)]["error"] - 0.05
    assert g[(budget, BEF_SS)]["completed"] == 50 > g[(budget, "bkube")]["completed"]


def test_more_budget_completes_more_tasks(grid):
    _, g = grid
    for spec in ("bkube", BEF):
        assert g[(300, spec)]["completed"] > 2 * g[(100, spec)]["completed"]


@pytest.mark.xfail(strict=True, reason="paper §6: B-KUBE's error <= bounded ε-first's; with "
                   "spammers at B = 300 it is higher (see docs/reproductions/bkube.md)")
def test_paper_claim_bkube_error_at_most_bounded_eps_first_set_b_large_budget(grid):
    wset, g = grid
    if wset == "A":
        pytest.skip("the claim is checked where it fails: set B")
    assert g[(300, "bkube")]["error"] <= g[(300, BEF)]["error"]


def test_set_b_spammers_sit_at_random_positions():
    """Paper §6: set B is 15 workers of set A plus 5 spammers, in no stated order; the index
    matters (lower index first in the first K picks, round-robin and knapsack ties), so the
    spammers must not always take the same indices."""
    hits = np.zeros(20, dtype=int)
    for r in range(400):
        inst = make_instance(50, "B", np.random.default_rng([3, r]))
        spam = np.flatnonzero(inst.p == 0.5)
        assert spam.size == 5
        hits[spam] += 1
    # each index is a spammer in 5/20 of the draws: 100 of 400 expected, sd ~ 8.7
    assert hits.min() > 60 and hits.max() < 140
    first = make_instance(50, "B", np.random.default_rng(0), spammers="first")
    assert np.all(first.p[:5] == 0.5) and np.all(first.p[5:] > 0.5)
    with pytest.raises(ValueError):
        make_instance(50, "B", np.random.default_rng(0), spammers="last")


@pytest.mark.parametrize("rule", ["at-label", "current"])
def test_replayed_agreement_matches_the_policy_state(rule):
    """``agreement_estimates`` (used by ``--estimates``) scores a stream exactly as the
    policy's own update does under the same rule."""
    from labelq.policies import Observation, Problem, build
    from labelq.reproductions.bkube import agreement_estimates

    inst = make_instance(50, "B", np.random.default_rng(4))
    policy = build(f"bkube:agreement={rule}")
    state = policy.init_state(Problem(n_tasks=50, n_workers=20, n_classes=2,
                                      worker_cost=inst.cost, worker_capacity=inst.capacity,
                                      budget=200.0))
    rng = np.random.default_rng(8)
    mask = np.ones((50, 20), dtype=bool)
    for _ in range(250):
        pair = policy.select_pair(state, mask & policy.feasible(state)[None, :], rng)
        if pair is None:
            break
        t, w = pair
        lab = inst.truth[t] if rng.random() < inst.p[w] else 1 - inst.truth[t]
        policy.update(state, Observation(task=t, worker=w, label=int(lab)))
    assert state.pulls.sum() > 100
    agree, pulls = agreement_estimates(state.task_labels, 20, 2, rule)
    np.testing.assert_array_equal(pulls, state.pulls)
    np.testing.assert_allclose(agree, state.agree, atol=1e-9)


def test_estimates_at_label_overrates_spammers_and_the_bonus_picks_poor_workers():
    """The diagnosis of docs/reproductions/bkube.md, at reduced size (T = 50, set B, B = 300,
    30 runs, B-KUBE's own stream): the at-label estimate rates spammers (v = 0) well above 0
    and above the current-majority estimate; the knapsack's density order on v̂ + radius puts
    workers of much lower true value first than the oracle order v/c."""
    g = run_grid(50, "B", [300], ["bkube"], runs=30, seed=11, estimates=True)
    e = g[(300, "bkube")]["estimates"]
    at, at_se = e["bias_spam[at-label]"]
    cur, _ = e["bias_spam[current]"]
    assert at > 3 * at_se and at > cur + 0.1
    assert e["radius"][0] > 0.5  # as large as a good part of the range of v in [0, 1]
    assert e["top_ucb[at-label]"][0] < e["top_oracle"][0] - 0.2
