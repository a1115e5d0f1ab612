"""Dirichlet-posterior math of multi-class Opt-KG (Chen, Lin & Zhou 2013, Section 5).

A task's state is alpha in R^C (prior all ones); a label of class k adds 1 to alpha_k.

I_k(alpha) = P(theta_k is the largest | Dir(alpha)). With theta = G / sum(G) for independent
G_c ~ Gamma(alpha_c, 1), theta_k is the largest iff G_k is, so

    I_k(alpha) = integral_0^inf gamma.pdf(x; alpha_k) * prod_{c != k} gammainc(alpha_c, x) dx.

The integrand is at most gamma.pdf(x; alpha_k), so the integral is taken over the mass of
Gamma(alpha_k) itself: composite Gauss-Legendre in ln x on panels cut at tail quantiles
(1e-40 ... 0.5 ... 1 - 1e-40) of Gamma(alpha_k), finer in the upper tail where a losing
class's small I_k lives; the product is summed in log space.
The neglected tails weigh at most 2e-40, so rewards stay meaningful down to ~1e-35.
``coarse=True`` (used where many rows are needed per decision, ``_dirichlet_workers``) cuts
fewer panels (tails at 1e-16, 8 nodes each: 112 points instead of 252): relative error
below 1e-6 for I_k above 1e-8 (tested), and tails under 1e-16 are lost.

Rewards: with the loss L(alpha) = 1 - h(I(alpha)) = sum_{k != argmax} I_k (each small I_k
kept at its own precision, never 1 - max), R_j = L(alpha) - L(alpha + e_j).
For C = 2 this equals the Beta formulas with a = alpha_1, b = alpha_0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammainc, gammainccinv, gammaincinv, gammaln

from .base import FloatArray

__all__ = ["prob_largest", "label_rewards"]

_LOWER = np.array([1e-40, 1e-20, 1e-10, 1e-5, 1e-3, 0.02, 0.1, 0.25, 0.5])
_UPPER = np.array([0.25, 0.1, 0.02, 1e-3, 1e-5, 1e-7, 1e-10, 1e-13, 1e-16, 1e-20, 1e-25, 1e-30,
                   1e-40])
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(12)
_COARSE = (np.array([1e-16, 1e-8, 1e-4, 0.01, 0.1, 0.3, 0.5]),
           np.array([0.3, 0.1, 0.01, 1e-4, 1e-7, 1e-10, 1e-13, 1e-16]),
           *np.polynomial.legendre.leggauss(8))
_FINE = (_LOWER, _UPPER, _NODES, _WEIGHTS)


def _panels(alpha_k: FloatArray, coarse: bool = False) -> tuple[FloatArray, FloatArray]:
    """Points t = ln x (m, P) and weights w (m, P) covering Gamma(alpha_k)'s mass."""
    lower, upper, nodes, weights = _COARSE if coarse else _FINE
    ak = alpha_k[:, None]
    edges = np.concatenate([gammaincinv(ak, lower[None, :]),
                            gammainccinv(ak, upper[None, :])], axis=1)  # (m, 22)
    # in t = ln x the integrand x * pdf(x) has no singularity at 0 for alpha_k < 1
    edges = np.log(edges)
    left, right = edges[:, :-1, None], edges[:, 1:, None]
    half = (right - left) / 2.0
    t = left + half * (nodes[None, None, :] + 1.0)
    w = half * weights[None, None, :]
    m = len(alpha_k)
    return t.reshape(m, -1), w.reshape(m, -1)


def prob_largest(alpha: ArrayLike, coarse: bool = False) -> FloatArray:
    """I_k(alpha) for every row of ``alpha`` (n, C); rows sum to 1 up to quadrature error
    (``coarse``: the cheaper panels, see the module docstring)."""
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    n, C = alpha.shape
    out = np.empty((n, C))
    for k in range(C):
        ak = alpha[:, k]
        t, w = _panels(ak, coarse)  # (n, P)
        x = np.exp(t)
        with np.errstate(divide="ignore"):
            logf = ak[:, None] * t - x - gammaln(ak)[:, None]  # ln(x * pdf(x))
            for c in range(C):
                if c != k:
                    logf = logf + np.log(gammainc(alpha[:, c][:, None], x))
        out[:, k] = (w * np.exp(logf)).sum(axis=1)
    return out


def _loss(i: FloatArray) -> FloatArray:
    """sum of I_k over all but the (first) largest: 1 - h(I) without the 1 - x cancellation."""
    top = np.argmax(i, axis=1)
    keep = np.ones_like(i, dtype=bool)
    keep[np.arange(len(i)), top] = False
    return np.where(keep, i, 0.0).sum(axis=1)


def label_rewards(alpha: ArrayLike) -> FloatArray:
    """R (n, C): R[:, j] = h(I(alpha + e_j)) - h(I(alpha)) for each row of ``alpha``."""
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    n, C = alpha.shape
    stacked = np.concatenate([alpha] + [alpha + np.eye(C)[j] for j in range(C)], axis=0)
    losses = _loss(prob_largest(stacked)).reshape(C + 1, n)
    return (losses[0][None, :] - losses[1:]).T
