"""Beta-posterior math of Opt-KG (Chen, Lin & Zhou, ICML 2013, Sections 2-4 and appendix).

Binary labels: class index 1 is the paper's "+1", class index 0 is "-1". A task's state is
Beta(a, b) over theta = P(label +1); ``a`` counts (pseudo-)labels of class 1, ``b`` of class 0.

* ``prob_positive(a, b)`` -> (I, 1 - I) with I(a, b) = P(theta >= 0.5 | Beta(a, b)). Both come
  from their own ``betainc`` call: I = betainc(b, a, 0.5), 1 - I = betainc(a, b, 0.5), so
  neither loses its digits to a ``1 - x`` cancellation.
* ``label_rewards(a, b)`` -> (R1, R2), the paper's eqs. (9)-(10): the change of the expected
  accuracy h(I) = max(I, 1 - I) when the next label is +1 (R1) or -1 (R2). Closed form with
  inc = 0.5^(a+b) / B(a, b) (identity I(a+1, b) = I(a, b) + inc/a, I(a, b+1) = I(a, b) - inc/b):
  a >= b+1: R1 = inc/a, R2 = -inc/b; b >= a+1: R1 = -inc/a, R2 = inc/b; a = b: inc/a, inc/b.
  ``inc`` is computed in log space, exp((a+b) ln 0.5 - betaln(a, b)), so confident states
  (a=5000, b=4000: R1 = 2.5e-27) keep a meaningful, non-zero reward where the direct
  difference of h values is exactly 0.0. Non-integer states with 0 < |a - b| < 1 (after
  moment matching) fall back to differences of min(I, 1 - I).
* ``kg_reward(a, b)`` -> p1 R1 + p2 R2 in closed form: exactly 0 for |a - b| >= 1, 2 inc/(a+b)
  for a = b, so the deterministic-KG ties of the paper's Proposition 3.1 are exact.
* ``worker_update(a, b, c, d, z)`` and ``worker_rewards(a, b, c, d)``: the one-coin model of
  Section 4 (worker reliability rho ~ Beta(c, d)), see those functions.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betainc, betaln, digamma

from .base import FloatArray

__all__ = ["prob_positive", "label_rewards", "kg_reward", "worker_update", "worker_gold_update",
           "worker_rewards", "reward_plus", "min_tail", "predictive_positive", "onecoin_vb"]

LN_HALF = float(np.log(0.5))


def _arrays(*xs: ArrayLike) -> tuple[FloatArray, ...]:
    return np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in xs))


def prob_positive(a: ArrayLike, b: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(I, 1 - I) with I = P(theta >= 0.5 | Beta(a, b)); each from its own betainc call."""
    a, b = _arrays(a, b)
    return betainc(b, a, 0.5), betainc(a, b, 0.5)


def _inc(a: FloatArray, b: FloatArray) -> FloatArray:
    # 0.5^(a+b) / B(a, b) in log space: both factors under/overflow alone for large a+b.
    return np.exp((a + b) * LN_HALF - betaln(a, b))


def _min_tail(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """min(I, 1 - I) = 1 - h(I), the posterior error of the Bayes decision."""
    i, j = prob_positive(a, b)
    return np.minimum(i, j)


def min_tail(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """``_min_tail(a, b)`` bit for bit, with one ``betainc`` per element instead of two
    where the smaller tail is clear: for a >= b it is P(theta < 0.5) = betainc(a, b, 0.5),
    else betainc(b, a, 0.5); where that value is below 0.49 the other tail is (exactly) one
    minus it, above 0.51: a gap of 0.02, far beyond any rounding of ``betainc`` (relative
    1e-13 at worst), so ``np.minimum`` of the two would return this value. Elsewhere (tails
    within 0.01 of 0.5, or NaN) both are computed and ``np.minimum`` taken as in
    ``_min_tail``."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    a, b = np.broadcast_arrays(np.atleast_1d(np.asarray(a, dtype=float)),
                               np.atleast_1d(np.asarray(b, dtype=float)))
    swap = a < b
    lo_arg, hi_arg = np.where(swap, b, a), np.where(swap, a, b)
    out = betainc(lo_arg, hi_arg, 0.5)
    near = ~(out < 0.49)
    if near.any():
        na, nb = a[near], b[near]
        out[near] = np.minimum(betainc(nb, na, 0.5), betainc(na, nb, 0.5))
    return out.reshape(shape)


def label_rewards(a: ArrayLike, b: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(R1, R2): reward of a +1 label and of a -1 label for tasks in state Beta(a, b)."""
    a, b = _arrays(a, b)
    inc = _inc(a, b)
    r1 = np.where(a >= b, inc / a, -inc / a)
    r2 = np.where(b >= a, inc / b, -inc / b)
    frac = (np.abs(a - b) < 1.0) & (a != b)
    if frac.any():
        fa, fb, finc = a[frac], b[frac], inc[frac]
        i, j = prob_positive(fa, fb)
        lo = np.minimum(i, j)
        r1 = r1.copy()
        r2 = r2.copy()
        r1[frac] = lo - np.minimum(i + finc / fa, j - finc / fa)
        r2[frac] = lo - np.minimum(i - finc / fb, j + finc / fb)
    return r1, r2


def kg_reward(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Knowledge-gradient reward (a R1 + b R2) / (a + b), exact zeros where |a - b| >= 1."""
    a, b = _arrays(a, b)
    out = np.where(a == b, 2.0 * _inc(a, b) / (a + b), 0.0)
    frac = (np.abs(a - b) < 1.0) & (a != b)
    if frac.any():
        r1, r2 = label_rewards(a[frac], b[frac])
        fa, fb = a[frac], b[frac]
        out = out.copy()
        out[frac] = (fa * r1 + fb * r2) / (fa + fb)
    return out


# --- one-coin workers (Section 4 and the appendix) --------------------------------------

def predictive_positive(a: ArrayLike, b: ArrayLike, c: ArrayLike,
                        d: ArrayLike) -> FloatArray:
    """P(Z = +1) = (ac + bd) / ((a+b)(c+d)) for a task Beta(a, b) and worker Beta(c, d)."""
    a, b, c, d = _arrays(a, b, c, d)
    return (a * c + b * d) / ((a + b) * (c + d))


def _match_mixture(x: FloatArray | float, y: FloatArray | float, u: FloatArray,
                   v: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Beta(x', y') with the first two moments of u Beta(x+1, y) + v Beta(x, y+1), u + v = 1.

    The exact one-coin marginal posteriors are such two-component mixtures, so the paper's
    moments E, E2 (ALGORITHMS.md 1.2) are theirs. The variance is assembled from positive
    terms (within-component variances + u v / (T+1)^2 spread) instead of E2 - E^2, which is
    0.0 in float64 for a worker with a very large c + d; 1 - E is also formed directly.
    """
    t = x + y
    m = (x + u) / (t + 1.0)
    mc = (y + v) / (t + 1.0)
    var = ((u * (x + 1.0) * y + v * x * (y + 1.0)) / ((t + 1.0) ** 2 * (t + 2.0))
           + u * v / (t + 1.0) ** 2)
    s = m * mc / var - 1.0
    return m * s, mc * s


def worker_update(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike,
                  z: ArrayLike) -> tuple[FloatArray, ...]:
    """Moment-matched posterior (a~, b~, c~, d~) after worker Beta(c, d) labels task Beta(a, b).

    ``z`` is +1 (class 1) or -1 (class 0). Both factors use the pre-update a, b, c, d.
    Label +1, n = ac + bd: theta ~ (ac/n) Beta(a+1, b) + (bd/n) Beta(a, b+1),
    rho ~ (ac/n) Beta(c+1, d) + (bd/n) Beta(c, d+1).
    Label -1, n = ad + bc: theta ~ (ad/n) Beta(a+1, b) + (bc/n) Beta(a, b+1),
    rho ~ (bc/n) Beta(c+1, d) + (ad/n) Beta(c, d+1).
    """
    a, b, c, d, z = _arrays(a, b, c, d, z)
    pos = z > 0
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    n = np.where(pos, ac + bd, ad + bc)
    # weight of the "theta went up" component and of the "rho went up" component
    u_task = np.where(pos, ac, ad) / n
    v_task = np.where(pos, bd, bc) / n
    u_work = np.where(pos, ac, bc) / n
    v_work = np.where(pos, bd, ad) / n
    a2, b2 = _match_mixture(a, b, u_task, v_task)
    c2, d2 = _match_mixture(c, d, u_work, v_work)
    return a2, b2, c2, d2


def worker_gold_update(c: ArrayLike, d: ArrayLike,
                       correct: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Exact conjugate update of a worker's Beta(c, d) on a gold question with known answer."""
    c, d, correct = _arrays(c, d, correct)
    ok = correct > 0
    return np.where(ok, c + 1.0, c), np.where(ok, d, d + 1.0)


def worker_rewards(a: ArrayLike, b: ArrayLike, c: ArrayLike,
                   d: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(R_{+1}, R_{-1}) = h(I(a~(z), b~(z))) - h(I(a, b)) for the moment-matched task update.

    Formed as differences of min(I, 1 - I) (each from its own betainc), never as 1 - x.
    The current min(I, 1 - I) depends on the task only: it is computed on the (a, b) shape
    before broadcasting against the workers (same values, fewer betainc calls).
    """
    lo = _min_tail(a, b)
    a, b, c, d = _arrays(a, b, c, d)
    lo = np.broadcast_to(lo, a.shape)
    ap, bp, _, _ = worker_update(a, b, c, d, 1.0)
    am, bm, _, _ = worker_update(a, b, c, d, -1.0)
    return lo - _min_tail(ap, bp), lo - _min_tail(am, bm)


def reward_plus(a: FloatArray | float, b: FloatArray | float, c: FloatArray | float,
                d: FloatArray | float, lo: FloatArray) -> FloatArray:
    """R+ = max(R_{+1}, R_{-1}) of ``worker_rewards`` with the task term ``lo = _min_tail(a, b)``
    given (a caller caches it per task) and without broadcasting or the worker half of
    ``worker_update``. Every float operation on an element is one ``worker_rewards``
    performs on it, and all of them are elementwise, so the values are bit-identical to
    ``np.maximum(*worker_rewards(a, b, c, d))`` on any subset of pairs (tested)."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    n_pos, n_neg = ac + bd, ad + bc
    # one of (a, b) and (c, d) is an array, so the weights are; mypy sees float | array
    ap, bp = _match_mixture(a, b, cast(FloatArray, ac / n_pos), cast(FloatArray, bd / n_pos))
    am, bm = _match_mixture(a, b, cast(FloatArray, ad / n_neg), cast(FloatArray, bc / n_neg))
    return np.maximum(lo - min_tail(ap, bp), lo - min_tail(am, bm))


def onecoin_vb(task: ArrayLike, worker: ArrayLike, label: ArrayLike, n_tasks: int,
               n_workers: int, *, prior: float = 1.0, c0: float = 4.0, d0: float = 1.0,
               gold_truth: ArrayLike | None = None, max_iter: int = 500,
               tol: float = 1e-9) -> tuple[FloatArray, ...]:
    """Batch mean-field variational Bayes of the same one-coin model over *all* labels.

    The sequential moment matching (``worker_update``) sees each label once, with the
    posteriors of that moment: a worker's first labels on fresh tasks (a = b) teach it
    nothing, and later labels never revise earlier updates. This fits the paper's model
    jointly instead. Write each label as the label of a noiseless worker, Y ~ Bernoulli(theta_i)
    (the paper's own reading of theta), copied by worker j with probability rho_j:
    P(Z = Y) = rho_j, which gives back P(Z = +1) = theta rho + (1 - theta)(1 - rho). With
    q(theta_i) q(rho_j) prod q(Y) every factor is conjugate:

    * q(Y = +1) ∝ exp(E ln theta_i + E ln(rho_j if Z = +1 else 1 - rho_j)), and the
      symmetric expression for Y = -1 (E ln of a Beta: digamma differences);
    * theta_i ~ Beta(prior + sum q(Y = +1), prior + sum q(Y = -1)) over task i's labels;
    * rho_j ~ Beta(c0 + sum q(Y = Z), d0 + sum q(Y != Z)) over worker j's labels.

    Coordinate ascent from the priors (the first sweep is then a reliability-weighted vote)
    until no parameter moves by more than ``tol``. ``label`` holds class indices (1 = "+1").
    ``gold_truth`` (class index per label, -1 where unknown): a gold label has Y = truth
    and counts for its worker only, as in ``worker_gold_update``.
    Returns (a, b, c, d), the same Beta-product shape as the sequential state.
    """
    task = np.asarray(task, dtype=np.int64)
    worker = np.asarray(worker, dtype=np.int64)
    z = np.asarray(label, dtype=np.int64) == 1
    gt = (np.full(task.shape, -1, dtype=np.int64) if gold_truth is None
          else np.asarray(gold_truth, dtype=np.int64))
    gold = gt >= 0
    free = ~gold
    a = np.full(n_tasks, float(prior))
    b = a.copy()
    c = np.full(n_workers, float(c0))
    d = np.full(n_workers, float(d0))
    q_gold = (gt[gold] == 1).astype(float)
    tf, wf, zf = task[free], worker[free], z[free]
    for _ in range(max_iter):
        dab = digamma(a + b)
        dcd = digamma(c + d)
        ln_t, ln_nt = digamma(a) - dab, digamma(b) - dab
        ln_r, ln_nr = digamma(c) - dcd, digamma(d) - dcd
        up = ln_t[tf] + np.where(zf, ln_r[wf], ln_nr[wf])
        down = ln_nt[tf] + np.where(zf, ln_nr[wf], ln_r[wf])
        q = np.empty(task.shape)
        q[free] = 0.5 * (1.0 + np.tanh(0.5 * (up - down)))  # logistic, overflow-free
        q[gold] = q_gold
        agree = np.where(z, q, 1.0 - q)
        a2 = prior + np.bincount(tf, q[free], n_tasks)
        b2 = prior + np.bincount(tf, 1.0 - q[free], n_tasks)
        c2 = c0 + np.bincount(worker, agree, n_workers)
        d2 = d0 + np.bincount(worker, 1.0 - agree, n_workers)
        moved = max(float(np.max(np.abs(a2 - a), initial=0.0)),
                    float(np.max(np.abs(c2 - c), initial=0.0)))
        a, b, c, d = a2, b2, c2, d2
        if moved < tol:
            break
    return a, b, c, d
