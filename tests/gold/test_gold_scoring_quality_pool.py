"""Beta gold scores, the pause rule and the gold pool helpers."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from labelq.gold.pool import ExhaustionRule, pick_unseen_gold, unseen_gold
from labelq.gold.quality import QualityRule
from labelq.gold.scoring import BetaPrior, GoldScores


def test_record_is_vectorised_and_counts_repeats():
    s = GoldScores.zeros(3, 2)
    s.record([0, 0, 0, 2], [1, 1, 0, 1], [True, False, True, True])
    s.record(1, 0, False)
    assert s.total.tolist() == [[1, 2], [1, 0], [0, 1]]
    assert s.correct.tolist() == [[1, 1], [0, 0], [0, 1]]
    assert s.mean()[0, 1] == pytest.approx(2 / 4)  # Beta(1+1, 1+1)
    assert s.mean(pooled=True)[0] == pytest.approx(3 / 5)  # prior counted once


def test_prior_and_interval_narrow_with_data():
    s = GoldScores(np.array([[8.0], [80.0]]), np.array([[10.0], [100.0]]), BetaPrior(2, 2))
    assert s.mean()[:, 0] == pytest.approx([10 / 14, 82 / 104])
    lo, hi = s.credible_interval(0.9)
    assert (hi - lo)[1, 0] < (hi - lo)[0, 0] / 2
    assert lo[0, 0] == pytest.approx(stats.beta.ppf(0.05, 10, 4))
    with pytest.raises(ValueError, match="prior a must be a finite number > 0, got 0"):
        BetaPrior(0, 1)
    with pytest.raises(ValueError, match="0 <= correct <= total"):
        GoldScores(np.array([[3.0]]), np.array([[2.0]]))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.floats(0.5, 0.99))
def test_interval_contains_mean(c, extra, level):
    s = GoldScores(np.array([[float(c)]]), np.array([[float(c + extra)]]))
    lo, hi = s.credible_interval(level)
    assert lo[0, 0] <= s.mean()[0, 0] <= hi[0, 0]


def test_scores_round_trip_through_json():
    s = GoldScores.zeros(2, 3, BetaPrior(2, 1))
    s.record([1, 1], [2, 0], [True, False])
    back = GoldScores.from_dict(json.loads(json.dumps(s.to_dict())))
    assert np.array_equal(back.total, s.total) and back.prior == s.prior


def scores(correct, total):
    return GoldScores(np.array(correct, float)[:, None], np.array(total, float)[:, None])


def test_pause_rule_needs_evidence_not_just_a_low_mean():
    rule = QualityRule(threshold=0.7, min_gold=10, confidence=0.95)
    s = scores([4, 5, 7, 3, 0], [10, 10, 10, 9, 5])
    # 4/10 paused; 5/10 and 7/10 (means 0.5, 0.67 < 0.7) not; 3/9 and 0/5 lack min_gold
    assert rule.workers_to_pause(s).tolist() == [0]
    assert (s.mean()[:, 0] < 0.7).sum() == 5


def test_pause_rule_rarely_pauses_good_workers_and_catches_bad_ones():
    rng = np.random.default_rng(0)
    n = 40
    good = rng.binomial(n, 0.8, size=2000)
    bad = rng.binomial(n, 0.5, size=2000)
    rule = QualityRule(threshold=0.7, min_gold=10)
    paused = rule.pause_mask(scores(np.r_[good, bad], np.full(4000, n)))
    assert paused[:2000].mean() < 0.01
    assert paused[2000:].mean() > 0.8  # 0.88 measured: caught by 40 gold answers


def test_per_category_pauses_on_any_bad_category():
    s = GoldScores(np.array([[20.0, 2.0], [20.0, 9.0]]), np.array([[20.0, 12.0], [20.0, 12.0]]))
    assert QualityRule(per_category=True).workers_to_pause(s).tolist() == [0]
    assert QualityRule(per_category=False).workers_to_pause(s).tolist() == []


@pytest.mark.parametrize("c, n, threshold, prior", [
    (0, 0, 0.7, (1, 1)), (3, 10, 0.7, (1, 1)), (9, 10, 0.6, (1, 1)), (40, 100, 0.8, (2, 1)),
    (0, 25, 0.5, (1, 3))])
def test_log_evidence_is_the_mixture_likelihood_ratio(c, n, threshold, prior):
    from scipy import integrate

    s = GoldScores(np.array([[float(c)]]), np.array([[float(n)]]), BetaPrior(*prior))
    ratio = lambda a: (a / threshold) ** c * ((1 - a) / (1 - threshold)) ** (n - c)
    num, _ = integrate.quad(lambda a: ratio(a) * stats.beta.pdf(a, *prior), 0, threshold,
                            epsabs=0, epsrel=1e-10)
    expected = np.log(num / stats.beta.cdf(threshold, *prior))
    assert s.log_evidence_below(threshold)[0, 0] == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_log_evidence_stays_finite_far_from_the_threshold():
    s = scores([0, 1000], [2000, 1000])
    ev = s.log_evidence_below(0.7)[:, 0]
    assert np.isfinite(ev).all() and ev[0] > 1000
    # all right: ∫_0^θ (a/θ)^n da/θ = 1/(n+1) — the ratio never exceeds 1 below θ
    assert ev[1] == pytest.approx(-np.log(1001))


def looked_at_every_answer(rule, accuracy, n=200, workers=4000, seed=0):
    """Share of simulated workers paused at some point over ``n`` gold answers when the rule
    is checked after each one (as the applier does)."""
    rng = np.random.default_rng(seed)
    correct = np.cumsum(rng.random((workers, n)) < accuracy, axis=1)
    ever = np.zeros(workers, dtype=bool)
    for k in range(n):
        ever |= rule.pause_mask(scores(correct[:, k], np.full(workers, k + 1.0)))
    return ever.mean()


def test_sequential_rule_bounds_wrongful_pauses_however_often_it_looks():
    posterior = QualityRule(threshold=0.7, min_gold=10, confidence=0.95)
    sequential = QualityRule(threshold=0.7, min_gold=10, confidence=0.95, rule="sequential")
    # a worker exactly at the threshold: the posterior rule, looked at 200 times, pauses
    # about a quarter of them; the sequential one stays under 1 - confidence
    assert looked_at_every_answer(posterior, 0.7) > 0.2
    assert looked_at_every_answer(sequential, 0.7) < 0.05
    # and it still catches a spammer, with more evidence
    assert looked_at_every_answer(sequential, 0.5, n=100) > 0.85  # 0.92 measured


@pytest.mark.parametrize("kwargs, message", [
    ({"rule": "bayes"}, "rule must be one of posterior, sequential, got 'bayes'"),
    ({"threshold": 1.0}, "threshold must be in (0, 1), got 1.0"),
    ({"min_gold": 0}, "min_gold must be an integer >= 1, got 0"),
    ({"confidence": 1.0}, "confidence must be in [0.5, 1), got 1.0"),
])
def test_rule_validation(kwargs, message):
    with pytest.raises(ValueError) as info:
        QualityRule(**kwargs)
    assert str(info.value) == message


def test_pick_unseen_gold_never_repeats_and_is_uniform():
    pool = np.array([10, 11, 12, 13])
    rng = np.random.default_rng(0)
    picks = [pick_unseen_gold(pool, {11}, rng) for _ in range(3000)]
    assert set(picks) == {10, 12, 13}
    assert max(np.bincount(picks)[[10, 12, 13]]) < 1100
    assert pick_unseen_gold(pool, pool, rng) is None
    allowed = np.array([True, True, False, False])
    assert pick_unseen_gold(pool, [10], rng, allowed) == 11
    assert unseen_gold(pool, []).tolist() == [10, 11, 12, 13]


def test_exhaustion_boundary_and_vectorised():
    rule = ExhaustionRule(0.8)
    assert rule.near_exhaustion(10, 8) is True
    assert rule.near_exhaustion(10, 7) is False
    assert rule.near_exhaustion(0, 0) is True
    assert rule.near_exhaustion(np.array([5, 5, 100]), np.array([3, 4, 79])).tolist() == \
        [False, True, False]
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\], got 0"):
        ExhaustionRule(0)
