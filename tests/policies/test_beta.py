"""Binary Opt-KG math (ALGORITHMS.md 1.1, 1.2): test vectors, properties, no cancellation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from labelq.policies import _beta

# ALGORITHMS.md 1.1: (a, b) -> I, R1, R2
VECTORS_11 = [
    (1, 1, 0.5, 0.25, 0.25),
    (2, 1, 0.75, 0.125, -0.25),
    (2, 2, 0.5, 0.1875, 0.1875),
    (3, 2, 0.6875, 0.125, -0.1875),
    (4, 4, 0.5, 0.13671875, 0.13671875),
    (5, 3, 0.7734375, 0.08203125, -0.13671875),
    (10, 10, 0.5, 0.088098526001, 0.088098526001),
    (20, 5, 0.999228060246, 0.000316679478, -0.001266717911),
    (50, 49, 0.540196584539, 0.039392652848, -0.040196584539),
]


@pytest.mark.parametrize("a,b,I,R1,R2", VECTORS_11)
def test_binary_vectors(a, b, I, R1, R2):
    i, j = _beta.prob_positive(a, b)
    r1, r2 = _beta.label_rewards(a, b)
    assert i == pytest.approx(I, abs=1e-11)
    assert j == pytest.approx(1 - I, abs=1e-11)
    assert r1 == pytest.approx(R1, abs=1e-11)
    assert r2 == pytest.approx(R2, abs=1e-11)


@pytest.mark.parametrize("a,b,I,R1,R2", VECTORS_11)
def test_mirror_symmetry_of_rewards(a, b, I, R1, R2):
    r1, r2 = _beta.label_rewards(b, a)
    assert (r1, r2) == pytest.approx((R2, R1), abs=1e-12)


def _direct(a, b):
    """The naive definition h(I(a+1, b)) - h(I(a, b)) via scipy's Beta CDF."""
    h = lambda x: max(x, 1 - x)  # noqa: E731
    i = lambda a, b: stats.beta.sf(0.5, a, b)  # noqa: E731
    return h(i(a + 1, b)) - h(i(a, b)), h(i(a, b + 1)) - h(i(a, b))


def test_closed_form_matches_definition_on_random_states():
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.integers(1, 40, 200), rng.uniform(0.2, 30, 200)]).astype(float)
    b = np.concatenate([rng.integers(1, 40, 200), rng.uniform(0.2, 30, 200)]).astype(float)
    b[:20] = a[:20] + rng.uniform(-0.9, 0.9, 20)  # the |a - b| < 1 fallback
    r1, r2 = _beta.label_rewards(a, b)
    ref = np.array([_direct(x, y) for x, y in zip(a, b, strict=True)])
    np.testing.assert_allclose(r1, ref[:, 0], rtol=1e-7, atol=1e-13)
    np.testing.assert_allclose(r2, ref[:, 1], rtol=1e-7, atol=1e-13)


def test_late_budget_rewards_do_not_underflow():
    # the direct difference is exactly 0.0 here; the true value is ~2.5e-27
    assert _direct(5000, 4000)[0] == 0.0
    r1, r2 = _beta.label_rewards(5000.0, 4000.0)
    assert r1 == pytest.approx(2.5e-27, rel=0.01)
    assert r2 < 0 < r1
    # and the ordering between confident tasks stays meaningful
    r_more, _ = _beta.label_rewards(5000.0, 4100.0)
    assert r_more > r1


def test_probabilities_are_computed_directly_in_the_tails():
    i, j = _beta.prob_positive(4000.0, 5000.0)
    assert 0 < i < 1e-20 and j == 1.0
    assert i == pytest.approx(stats.beta.sf(0.5, 4000, 5000), rel=1e-9)


def test_kg_reward_closed_form():
    a = np.array([1, 2, 2, 3, 50, 7.5, 3.2], float)
    b = np.array([1, 1, 2, 7, 49, 7.5, 2.6], float)
    r1, r2 = _beta.label_rewards(a, b)
    expected = (a * r1 + b * r2) / (a + b)
    got = _beta.kg_reward(a, b)
    np.testing.assert_allclose(got, expected, atol=1e-15)
    assert np.all(got[[1, 3, 4]] == 0.0)  # exact zeros for |a - b| >= 1


# ALGORITHMS.md 1.2: (a, b, c, d, z) -> (a~, b~, c~, d~)
VECTORS_12 = [
    ((1, 1, 4, 1, +1), (1.3636363636, 0.9090909091, 4.0000000000, 1.0000000000)),
    ((1, 1, 4, 1, -1), (0.9090909091, 1.3636363636, 4.0000000000, 1.0000000000)),
    ((2, 1, 4, 1, +1), (2.4931506849, 0.9589041096, 4.3278688525, 0.9836065574)),
    ((2, 1, 4, 1, -1), (1.7906976744, 1.2790697674, 3.7058823529, 1.0588235294)),
    ((3, 5, 2, 2, +1), (3.0000000000, 5.0000000000, 1.9240506329, 2.1265822785)),
    # c~ is exactly 1000 (a = b leaves the worker unchanged); the note's 1000.0000075 carries
    # the E2 - E^2 rounding of the naive formula, hence the looser rtol here.
    ((1, 1, 1000, 0.001, +1), (1.9999950000, 0.9999990000, 1000.0000075, 0.0010000000)),
]


@pytest.mark.parametrize("args,expected", VECTORS_12)
def test_worker_update_vectors(args, expected):
    got = _beta.worker_update(*args)
    np.testing.assert_allclose(np.array(got, float), expected, rtol=1e-8, atol=1e-10)


def _exact_moments(a, b, c, d, z):
    """ALGORITHMS.md 1.2 formulas in exact rational arithmetic, then moment matching."""
    a, b, c, d = map(Fraction, (a, b, c, d))
    if z > 0:
        n = a * c + b * d
        et = a * ((a + 1) * c + b * d) / ((a + b + 1) * n)
        et2 = a * (a + 1) * ((a + 2) * c + b * d) / ((a + b + 1) * (a + b + 2) * n)
        er = c * (a * (c + 1) + b * d) / ((c + d + 1) * n)
        er2 = c * (c + 1) * (a * (c + 2) + b * d) / ((c + d + 1) * (c + d + 2) * n)
    else:
        n = b * c + a * d
        et = a * (b * c + (a + 1) * d) / ((a + b + 1) * n)
        et2 = a * (a + 1) * (b * c + (a + 2) * d) / ((a + b + 1) * (a + b + 2) * n)
        er = c * (b * (c + 1) + a * d) / ((c + d + 1) * n)
        er2 = c * (c + 1) * (b * (c + 2) + a * d) / ((c + d + 1) * (c + d + 2) * n)
    out = []
    for e, e2 in ((et, et2), (er, er2)):
        s = (e - e2) / (e2 - e * e)
        out += [float(e * s), float((1 - e) * s)]
    return out


def test_worker_update_matches_exact_moment_formulas():
    rng = np.random.default_rng(7)
    for _ in range(60):
        a, b, c, d = (Fraction(int(x), 8) for x in rng.integers(2, 200, 4))
        z = int(rng.choice([-1, 1]))
        got = _beta.worker_update(float(a), float(b), float(c), float(d), z)
        np.testing.assert_allclose(np.array(got, float), _exact_moments(a, b, c, d, z),
                                   rtol=1e-11)


@pytest.mark.parametrize("z", [1, -1])
def test_worker_update_properties(z):
    rng = np.random.default_rng(3)
    for a, c, d in rng.uniform(0.5, 20, (20, 3)):
        # a = b leaves the worker unchanged
        _, _, c2, d2 = _beta.worker_update(a, a, c, d, z)
        assert (c2, d2) == pytest.approx((c, d), rel=1e-12)
        # c = d (a coin-flip worker on average) leaves the task unchanged
        b = a * 1.7
        a2, b2, _, _ = _beta.worker_update(a, b, c, c, z)
        assert (a2, b2) == pytest.approx((a, b), rel=1e-12)
        # mirror: swapping a and b mirrors the sign of z
        p = _beta.worker_update(a, b, c, d, z)
        m = _beta.worker_update(b, a, c, d, -z)
        assert (p[0], p[1], p[2], p[3]) == pytest.approx((m[1], m[0], m[2], m[3]), rel=1e-12)


def test_perfect_worker_limit_is_the_conjugate_update():
    a2, b2, _, _ = _beta.worker_update(3.0, 2.0, 5.0, 1e-9, +1)
    assert (a2, b2) == pytest.approx((4.0, 2.0), rel=1e-7)
    a2, b2, _, _ = _beta.worker_update(3.0, 2.0, 5.0, 1e-9, -1)
    assert (a2, b2) == pytest.approx((3.0, 3.0), rel=1e-7)


def test_very_confident_worker_keeps_finite_update():
    a, b, c, d = 3.0, 2.0, 1e14, 1e13
    # the textbook E2 - E^2 for rho is rounding noise in float64 ...
    n = a * c + b * d
    e = c * (a * (c + 1) + b * d) / ((c + d + 1) * n)
    e2 = c * (c + 1) * (a * (c + 2) + b * d) / ((c + d + 1) * (c + d + 2) * n)
    with np.errstate(divide="ignore"):
        naive_size = np.float64(e - e2) / np.float64(e2 - e * e)
    assert not abs(naive_size / (c + d) - 1) < 0.01
    # ... the mixture form still gives a finite Beta with the right mean and size
    a2, b2, c2, d2 = _beta.worker_update(a, b, c, d, +1)
    assert np.isfinite([a2, b2, c2, d2]).all() and min(a2, b2, c2, d2) > 0
    assert c2 / (c2 + d2) == pytest.approx(c / (c + d), rel=1e-9)
    assert c2 + d2 == pytest.approx(c + d, rel=1e-6)
    rho = c / (c + d)  # the task update is then the known-reliability Bayes update
    u = a * rho / (a * rho + b * (1 - rho))
    assert a2 / (a2 + b2) == pytest.approx((a + u) / (a + b + 1), rel=1e-9)


def test_worker_rewards_vectors():
    cases = [((1, 1), 0.142102489517, 0.142102489517), ((2, 1), 0.081281253453, -0.118447312629),
             ((3, 2), 0.078663376947, -0.098659134305), ((5, 5), 0.072485088179, 0.072485088179)]
    for (a, b), rp, rm in cases:
        got = _beta.worker_rewards(a, b, 4.0, 1.0)
        assert got == pytest.approx((rp, rm), abs=1e-11)


def test_worker_rewards_reduce_to_identical_workers_for_perfect_reliability():
    a = np.array([1.0, 2, 3, 7, 20])
    b = np.array([1.0, 1, 5, 6, 3])
    got = _beta.worker_rewards(a, b, 1e9, 1e-9)
    np.testing.assert_allclose(got, _beta.label_rewards(a, b), atol=1e-8)


def test_gold_update_is_conjugate():
    assert _beta.worker_gold_update(4.0, 1.0, True) == (5.0, 1.0)
    assert _beta.worker_gold_update(4.0, 1.0, False) == (4.0, 2.0)
