"""Multi-class Opt-KG math (ALGORITHMS.md 1.3) and its agreement with the Beta case."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from labelq.policies import _beta, _dirichlet


@pytest.mark.parametrize("alpha,I,R", [
    ((1, 1, 1), (1 / 3, 1 / 3, 1 / 3), (5 / 18, 5 / 18, 5 / 18)),
    ((2, 1, 1), (11 / 18, 7 / 36, 7 / 36), (0.1759259259, -0.1759259259, -0.1759259259)),
    ((3, 2, 1), (0.6365740741, 0.2847222222, 0.0787037037),
     (0.1422325103, -0.1628086420, -0.1010802469)),
])
def test_vectors(alpha, I, R):
    np.testing.assert_allclose(_dirichlet.prob_largest([alpha])[0], I, atol=1e-10)
    np.testing.assert_allclose(_dirichlet.label_rewards([alpha])[0], R, atol=1e-10)


def test_two_classes_equal_the_beta_formulas():
    a = np.array([1, 2, 1, 5, 0.3, 7.5, 130, 5000], float)
    b = np.array([1, 1, 4, 3, 0.8, 7.2, 100, 4000], float)
    alpha = np.stack([b, a], axis=1)  # class 1 is "+1"
    i, j = _beta.prob_positive(a, b)
    np.testing.assert_allclose(_dirichlet.prob_largest(alpha), np.stack([j, i], 1), rtol=1e-9)
    r1, r2 = _beta.label_rewards(a, b)
    np.testing.assert_allclose(_dirichlet.label_rewards(alpha), np.stack([r2, r1], 1), rtol=1e-8)


def test_matches_adaptive_quadrature_of_the_definition():
    rng = np.random.default_rng(5)
    for _ in range(4):
        alpha = rng.integers(1, 40, size=4).astype(float)

        def ref(k):
            f = lambda x: stats.gamma.pdf(x, alpha[k]) * np.prod(  # noqa: E731
                [special.gammainc(alpha[c], x) for c in range(4) if c != k])
            return integrate.quad(f, 0, np.inf, epsabs=0, epsrel=1e-12, limit=400)[0]

        np.testing.assert_allclose(_dirichlet.prob_largest([alpha])[0],
                                   [ref(k) for k in range(4)], rtol=1e-9)


def test_rows_sum_to_one_and_monte_carlo_agrees():
    rng = np.random.default_rng(2)
    alpha = np.array([[3.0, 5.0, 2.0, 1.0]])
    i = _dirichlet.prob_largest(alpha)[0]
    assert i.sum() == pytest.approx(1.0, abs=1e-12)
    draws = rng.dirichlet(alpha[0], size=200_000)
    freq = np.bincount(draws.argmax(axis=1), minlength=4) / len(draws)
    np.testing.assert_allclose(i, freq, atol=0.004)


def test_confident_states_keep_small_nonzero_rewards():
    r = _dirichlet.label_rewards([[400.0, 300.0, 200.0]])[0]
    assert np.all(r != 0) and r[0] > 0 and np.all(np.abs(r) < 1e-4)


def test_coarse_quadrature_agrees_with_the_fine_one():
    """The cheaper panels of the multi-class worker rewards: relative error below 1e-6
    wherever I_k exceeds 1e-8 (confident and uncertain, small and large alphas)."""
    rng = np.random.default_rng(7)
    for C in (3, 4, 5):
        alpha = rng.uniform(0.3, 8.0, size=(300, C))
        alpha[:100] *= 6.0
        fine = _dirichlet.prob_largest(alpha)
        coarse = _dirichlet.prob_largest(alpha, coarse=True)
        big = fine > 1e-8
        assert (np.abs(coarse - fine)[big] / fine[big]).max() < 1e-6
