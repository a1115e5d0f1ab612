"""BBTA and its baselines (Zhang, Ma & Sugiyama 2015): hand-checked steps and invariants."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.policies.bbta import bbta_weighted_vote


def _problem(n=6, k=3, s=2, c=2):
    return Problem(n_tasks=n, n_workers=k, n_classes=c,
                   task_category=np.arange(n) % s, n_categories=s)


def _run(policy, problem, answers, steps, seed=0, mask=None):
    state = policy.init_state(problem)
    mask = np.ones(answers.shape, bool) if mask is None else mask.copy()
    rng = np.random.default_rng(seed)
    picks = []
    for _ in range(steps):
        pair = policy.select_pair(state, mask, rng)
        if pair is None:
            break
        i, j = pair
        assert mask[i, j]
        mask[i, j] = False
        policy.update(state, Observation(i, j, int(answers[i, j])))
        picks.append(pair)
    return state, picks


@pytest.mark.parametrize("spec, message", [
    ("bbta:explore=-1", "explore must be a non-negative integer, got -1"),
    ("bbta:explore=0.5", "explore must be a non-negative integer, got 0.5"),
    ("iethresh:eps=1.5", "eps must be in [0, 1], got 1.5"),
    ("crowdsense:smoothing=0", "smoothing must be > 0, got 0"),
    ("optkg-multi:c0=-1", "c0 must be a number > 0, got -1"),
])
def test_params_are_validated_with_precise_messages(spec, message):
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build(spec)


def test_bbta_importance_weighted_loss_by_hand():
    """Tie after two disagreeing labels: expected loss 1/2, p = 1/2 -> L[1] = 1."""
    pol = build("bbta:explore=0")
    st = pol.init_state(_problem(n=2, k=3, s=1))
    assert list(pol.update(st, Observation(0, 0, 1))) == [0]  # first label: no loss
    assert st.loss[0].tolist() == [0, 0, 0] and st.steps[0] == 1
    touched = pol.update(st, Observation(0, 1, 0))
    assert st.loss[0].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert sorted(touched.tolist()) == [0, 1]  # a loss re-scores the whole context
    eta = math.sqrt(math.log(3) / (2 * 3))
    w = np.exp(-eta * np.array([0.0, 1.0, 0.0]))
    assert pol.weights(st)[0] == pytest.approx(w / w.sum())
    # confidence |ybar| = |w0 - w1| / sum(w); worker 1 now counts less, so class 1 wins
    assert st.confidence[0] == pytest.approx((w[0] - w[1]) / w.sum())
    assert pol.predict_proba(st)[0].argmax() == 1


def test_bbta_agreeing_label_touches_only_its_task():
    pol = build("bbta:explore=0")
    st = pol.init_state(_problem(n=4, k=3, s=1))
    pol.update(st, Observation(0, 0, 1))
    assert pol.update(st, Observation(0, 2, 1)).tolist() == [0]
    assert st.loss.sum() == 0


def test_bbta_worker_draw_follows_exponential_weights_among_unlabelled():
    pol = build("bbta:explore=0")
    st = pol.init_state(_problem(n=1, k=4, s=1))
    st.loss[0] = [0.0, 2.0, 4.0, 0.0]
    st.steps[0] = 4
    st.labels[0, 3] = 1  # worker 3 already labelled: never drawn
    mask = np.ones((1, 4), bool)
    mask[0, 3] = True  # even if the caller's mask allows it, BBTA draws from mask & unlabelled?
    mask[0, 3] = False
    eta = math.sqrt(math.log(4) / (5 * 4))
    w = np.exp(-eta * np.array([0.0, 2.0, 4.0]))
    p = w / w.sum()
    rng = np.random.default_rng(1)
    draws = np.array([pol.select_pair(st, mask, rng)[1] for _ in range(6000)])
    freq = np.bincount(draws, minlength=4) / draws.size
    assert freq[3] == 0
    assert freq[:3] == pytest.approx(p, abs=0.02)


def test_bbta_pure_exploration_labels_one_task_per_context_by_everyone():
    k, s, n = 4, 2, 10
    answers = np.ones((n, k), dtype=np.int64)
    answers[:, 3] = 0  # worker 3 always disagrees with the majority
    pol = build("bbta:explore=1")
    st, picks = _run(pol, _problem(n=n, k=k, s=s), answers, steps=s * k)
    tasks = sorted({i for i, _ in picks})
    assert len(tasks) == s and sorted(st.category[tasks].tolist()) == [0, 1]
    assert all((st.labels[t] >= 0).all() for t in tasks)
    assert st.explore.sum() == s and st.steps.tolist() == [0, 0]
    assert st.explore_loss.tolist() == [[0, 0, 0, 1], [0, 0, 0, 1]]
    # the next step is adaptive: worker 3 gets less weight than the others
    assert pol.weights(st)[0, 3] < pol.weights(st)[0, 0]


def test_bbta_picks_lowest_confidence_and_learns_the_hammers():
    """Two contexts; worker j is always right on context j % 2 and answers at random on
    the other (the paper's spammer-hammer model): BBTA's weights find the hammers."""
    rng = np.random.default_rng(0)
    n, k, s = 100, 6, 2
    cat = np.arange(n) % s
    truth = rng.integers(0, 2, n)
    answers = rng.integers(0, 2, (n, k))
    for w in range(k):
        hit = cat == (w % s)
        answers[hit, w] = truth[hit]
    prob = Problem(n_tasks=n, n_workers=k, task_category=cat, n_categories=s)
    pol = build("bbta")
    st, picks = _run(pol, prob, answers, steps=4 * n)
    rnd_state, _ = _run(build("random"), prob, answers, steps=4 * n)
    rnd_acc = np.mean(build("random").predict_proba(rnd_state).argmax(axis=1) == truth)
    w = pol.weights(st)
    assert w[0, 0::2].sum() > 0.5 and w[1, 1::2].sum() > 0.5  # hammers favoured
    acc = np.mean(pol.predict_proba(st).argmax(axis=1) == truth)
    assert acc > 0.9 and acc > rnd_acc + 0.1


def test_bbta_select_is_lowest_confidence_among_open_tasks():
    pol = build("bbta:explore=0")
    st = pol.init_state(_problem(n=4, k=3, s=1))
    st.confidence[:] = [0.5, 0.2, 0.0, 0.2]
    mask = np.ones((4, 3), bool)
    mask[2] = False  # task 2 has no eligible worker
    assert pol.select_pair(st, mask, np.random.default_rng(0))[0] == 1  # first index on ties
    assert pol.select_pair(st, np.zeros((4, 3), bool), np.random.default_rng(0)) is None


def test_bbta_weighted_vote_matches_the_policy_and_is_documented_math():
    task = np.array([0, 0, 0, 1])
    worker = np.array([0, 1, 2, 2])
    label = np.array([1, 0, 0, 1])
    category = np.array([0, 1])
    weights = np.array([[0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    p = bbta_weighted_vote(task, worker, label, category, weights, n_classes=2)
    assert p[0] == pytest.approx([0.4 / 1.0, 0.6 / 1.0])
    assert p[1] == pytest.approx([0.0, 1.0])
    pol = build("bbta:explore=0")
    st = pol.init_state(_problem(n=2, k=3, s=2))
    st.labels[task, worker] = label
    st.weights[:] = weights
    assert pol.predict_proba(st) == pytest.approx(p)
    with pytest.raises(ValueError, match="same length"):
        bbta_weighted_vote(task, worker[:2], label, category, weights)


@pytest.mark.parametrize("spec", ["bbta", "bbta:explore=0", "iethresh:eps=0.9",
                                  "crowdsense:eps=0.1", "optkg-multi", "random"])
def test_state_round_trip_and_determinism(spec):
    rng = np.random.default_rng(3)
    answers = rng.integers(0, 2, (12, 5))
    pol = build(spec)
    prob = _problem(n=12, k=5, s=3)
    st, picks = _run(pol, prob, answers, steps=25, seed=7)
    _, picks2 = _run(pol, prob, answers, steps=25, seed=7)
    assert picks == picks2
    data = json.loads(json.dumps(pol.state_to_dict(st)))
    st2 = pol.state_from_dict(data)
    assert pol.predict_proba(st2) == pytest.approx(pol.predict_proba(st))
    mask = np.ones((12, 5), bool)
    assert pol.select_pair(st2, mask, np.random.default_rng(1)) == \
        pol.select_pair(st, mask, np.random.default_rng(1))


@pytest.mark.parametrize("spec", ["bbta", "iethresh", "crowdsense", "optkg-multi", "random"])
def test_never_picks_outside_the_mask(spec):
    rng = np.random.default_rng(5)
    answers = rng.integers(0, 2, (15, 6))
    mask = rng.random((15, 6)) < 0.5
    _run(build(spec), _problem(n=15, k=6, s=3), answers, steps=200, seed=1, mask=mask)


def test_iethresh_upper_interval_and_worker_set():
    pol = build("iethresh:eps=0.9")
    ui = pol.upper_interval(np.array([2.0]), np.array([1.0]), np.array([1.0]))
    assert ui[0] == pytest.approx(0.5 + student_t.ppf(0.975, 1) * math.sqrt(0.5 / 2))
    # first task: all workers tie on the prior, so every worker is asked
    answers = np.array([[1, 1, 0, 1]] * 3)
    st, picks = _run(pol, _problem(n=3, k=4, s=1), answers, steps=5, seed=0)
    first = picks[0][0]
    assert [j for i, j in picks[:4]] == [0, 1, 2, 3] and all(i == first for i, _ in picks[:4])
    # after the first task, worker 2 (disagreed) has a lower interval and is left out at 0.9
    ui = pol.upper_interval(st.n, st.s1, st.s2)
    assert ui[2] < ui[0] and not pol.worker_set(ui)[2] and picks[4][1] == 0


def test_crowdsense_two_best_one_random_then_threshold():
    pol = build("crowdsense:eps=0.01")
    st = pol.init_state(_problem(n=5, k=6, s=1))
    st.n[:] = [10, 10, 10, 10, 10, 10]
    st.s1[:] = [9, 8, 1, 1, 1, 1]
    q = pol.quality(st.n, st.s1)
    assert q[0] == pytest.approx((9 + 100) / (10 + 200))
    mask = np.ones((5, 6), bool)
    rng = np.random.default_rng(0)
    seq = []
    for _ in range(4):
        i, j = pol.select_pair(st, mask, rng)
        seq.append((i, j))
        mask[i, j] = False
        pol.update(st, Observation(i, j, 1))
    assert [j for _, j in seq[:2]] == [0, 1] and seq[2][1] >= 2
    assert len({i for i, _ in seq[:3]}) == 1
    # three agreeing labels: (|Score| - Q_l) / 4 > 0.01, so the fourth pick opens a new task
    assert seq[3][0] != seq[0][0]


def test_optkg_multi_equals_optkg_workers_with_one_category():
    rng = np.random.default_rng(2)
    answers = rng.integers(0, 2, (8, 4))
    prob = _problem(n=8, k=4, s=1)
    _, a = _run(build("optkg-multi"), prob, answers, steps=20)
    _, b = _run(build("optkg-workers"), prob, answers, steps=20)
    assert a == b


def test_optkg_multi_shares_budget_in_proportion_to_tasks():
    cat = np.array([0] * 10 + [1] * 30)
    prob = Problem(n_tasks=40, n_workers=3, task_category=cat, n_categories=2)
    answers = np.random.default_rng(0).integers(0, 2, (40, 3))
    st, picks = _run(build("optkg-multi"), prob, answers, steps=40)
    assert st.spent.tolist() == [10, 30]
    assert sum(cat[i] == 0 for i, _ in picks[:20]) == 5


def test_random_pair_is_uniform_over_eligible_pairs():
    pol = build("random")
    st = pol.init_state(_problem(n=3, k=2, s=1))
    mask = np.array([[True, False], [True, True], [False, False]])
    rng = np.random.default_rng(0)
    draws = [pol.select_pair(st, mask, rng) for _ in range(3000)]
    counts = {p: draws.count(p) for p in set(draws)}
    assert set(counts) == {(0, 0), (1, 0), (1, 1)}
    assert all(abs(c / 3000 - 1 / 3) < 0.03 for c in counts.values())


# --- the speed-ups keep every decision (issue 4 follow-up) --------------------------------

def _fingerprint_picks(spec, seed=3):
    """120 push steps on a 30-task, 6-worker, 3-context problem with fixed answers."""
    import hashlib

    rng = np.random.default_rng(seed)
    n, k, s = 30, 6, 3
    prob = Problem(n_tasks=n, n_workers=k, n_classes=2, task_category=np.arange(n) % s,
                   n_categories=s)
    truth = rng.integers(0, 2, n)
    good = (np.arange(k)[None, :] % s) == (np.arange(n)[:, None] % s)
    ans = np.where(rng.random((n, k)) < np.where(good, 0.95, 0.55), truth[:, None],
                   1 - truth[:, None])
    pol = build(spec)
    st = pol.init_state(prob)
    mask = np.ones((n, k), bool)
    out = []
    for _ in range(120):
        pr = pol.select_pair(st, mask, rng)
        if pr is None:
            break
        out.append((int(pr[0]), int(pr[1])))
        mask[pr] = False
        pol.update(st, Observation(pr[0], pr[1], int(ans[pr])))
    return hashlib.sha1(repr(out).encode()).hexdigest()[:16]


@pytest.mark.parametrize("spec, digest", [
    # recorded with the code before the speed-ups (commit a4dc716)
    ("bbta:explore=1", "513f914c2b6161a8"), ("bbta:explore=0", "398412448b4f8265"),
    ("optkg-multi", "5a9afebf827f8d1f"), ("iethresh:eps=0.9", "b859657873f4fe05"),
    ("crowdsense:eps=0.2", "746083e948428b2a"),
])
def test_faster_code_makes_the_same_choices_as_before(spec, digest):
    assert _fingerprint_picks(spec) == digest


def test_optkg_multi_cached_rewards_equal_a_full_recomputation():
    from labelq.policies import _beta

    problem = _problem(n=12, k=4, s=3)
    answers = np.random.default_rng(2).integers(0, 2, (12, 4))
    state, _ = _run(build("optkg-multi"), problem, answers, steps=30, seed=1)
    c, d = state.c[state.category], state.d[state.category]
    r_pos, r_neg = _beta.worker_rewards(state.a[:, None], state.b[:, None], c, d)
    assert np.array_equal(state.reward, np.maximum(r_pos, r_neg))  # bit-identical
    assert np.array_equal(state.lo, np.minimum(*_beta.prob_positive(state.a, state.b)))


def test_iethresh_memoised_t_quantiles_equal_scipy():
    from labelq.policies.iethresh import t_quantiles

    df = np.array([1.0, 3.0, 1.0, 7.5, 40.0, 3.0])
    assert np.array_equal(t_quantiles(0.975, df), student_t.ppf(0.975, df))


def test_margin_two_class_fast_path_equals_sorted_difference():
    from labelq.policies.votes import margin

    sc = np.random.default_rng(0).random((50, 2))
    sc[3] = 0.0
    tot = sc.sum(axis=1)
    part = np.sort(sc, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = np.nan_to_num((part[:, -1] - part[:, -2]) / tot)
    assert np.array_equal(margin(sc, tot), ref)
