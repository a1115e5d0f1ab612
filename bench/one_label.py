"""One label per task: what a worker's label shares say about its labels (issue 21;
docs/aggregation.md, "Sixth pass").

    nice -n 10 python -m bench.one_label [--draws 20] [--only product,temp]

At one label per task no label can be checked against another, and labelq's ``ds`` and
``auto`` give majority vote. The one thing left is each worker's label shares against the
class prior: under Dawid-Skene, if tasks reach a worker regardless of their class,
``P(true = y | worker answers y) = rho_y pi_yy / q(y) <= rho_y / q(y)``, where ``q`` is the
worker's answer distribution. For every shared data set subsampled to one label per task
(``bench.aggregation.subsample``: seed 1, the benchmark's draw, then ``--draws`` seeds from
100) this prints the accuracy of:

* ``mv``, and crowd-kit's ``MajorityVote`` and ``DawidSkene`` (``ck_mv``, ``ck_ds``);
* ``ck_rule``: crowd-kit's DawidSkene as one rule -- a worker who gave only one answer has
  ``P(y | k) = 1`` for every class, so its tasks go to the most frequent label;
* ``dirichlet``: the exact posterior of each task's class under ``ds``'s own Dirichlet prior
  on every confusion row (pseudo-counts ``smoothing`` + ``diag_prior`` on the diagonal),
  the worker's other labels marginalised (Monte Carlo over the prior, fixed seed), with the
  class prior at the label shares (``dirichlet_uniform``: at 1/K, which is majority vote);
* ``bound``: flip a label when even the bound ``rho_y / q(y)`` (rho at the label shares,
  ``q`` at its 5 % lower credible limit under a Jeffreys prior) leaves another class more
  probable;
* ``mixture``: each worker either answers like the crowd (its label shares Dirichlet around
  the crowd's, spread fitted) or independently of the truth (flat Dirichlet: its labels carry
  nothing and its tasks get the class prior); share of such workers, spread and class prior
  fitted by EM on the workers' label counts.

One line of JSON per data set (the single draw, the means over the draws, and which bars
hold); writes nothing.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.special import gammaln
from scipy.stats import beta as beta_dist

from labelq.datasets import load_dataset, shared_datasets_dir

from .aggregation import DRAW_SEED, TOL, subsample

SMOOTHING, DIAG_PRIOR = 0.3, 0.3  # labelq DawidSkene's defaults


def _counts(d) -> np.ndarray:
    n = np.zeros((d.n_workers, d.n_classes))
    np.add.at(n, (d.worker, d.label), 1.0)
    return n


def _vote(d, label: np.ndarray, soft: np.ndarray | None = None) -> np.ndarray:
    """Per-task scores from one (possibly changed, possibly soft) answer per label."""
    P = np.zeros((d.n_tasks, d.n_classes))
    if soft is None:
        np.add.at(P, (d.task, label), 1.0)
    else:
        np.add.at(P, d.task, soft)
    return P


def ck_rule(d) -> np.ndarray:
    n = _counts(d)
    one_answer = (n > 0).sum(axis=1) == 1
    label = np.where(one_answer[d.worker], np.argmax(n.sum(axis=0)), d.label)
    return _vote(d, label)


def dirichlet(d, rho: np.ndarray, samples: int = 4000, seed: int = 0) -> np.ndarray:
    K = d.n_classes
    rng = np.random.default_rng(seed)
    alpha = SMOOTHING + DIAG_PRIOR * np.eye(K)  # row k: the prior of P(answer . | true k)
    pis = np.stack([rng.dirichlet(alpha[k], size=samples) for k in range(K)], axis=1)
    logq = np.log(np.maximum(np.einsum("k,skj->sj", rho, pis), 1e-300))
    n = _counts(d)
    soft = np.empty((d.label.size, K))
    for w, y in zip(*np.nonzero(n), strict=True):
        other = n[w].copy()
        other[y] -= 1  # the worker's other labels
        lw = logq @ other
        wt = np.exp(lw - lw.max())
        post = rho * (wt @ pis[:, :, y])
        soft[(d.worker == w) & (d.label == y)] = post / post.sum()
    return _vote(d, d.label, soft)


def bound_flips(d, rho: np.ndarray, level: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``bound``'s answer per label under the class prior ``rho``, and which labels it
    flipped."""
    K = d.n_classes
    n = _counts(d)
    q = beta_dist.ppf(level, n + 0.5, n.sum(axis=1, keepdims=True) - n + (K - 1) * 0.5)
    u = np.minimum(1.0, rho[None, :] / np.maximum(q, 1e-12))[d.worker, d.label]
    other = np.tile(rho, (d.label.size, 1))
    other[np.arange(d.label.size), d.label] = 0.0
    # the rest of the posterior, spread over the other classes by the class prior
    flip = (1 - u) * other.max(axis=1) / other.sum(axis=1) > u
    return np.where(flip, other.argmax(axis=1), d.label), flip


def bound(d, level: float = 0.05) -> np.ndarray:
    n = _counts(d)
    return _vote(d, bound_flips(d, n.sum(axis=0) / n.sum(), level)[0])


def _dirmult(n: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    a = alpha.sum()
    return (gammaln(a) - gammaln(n.sum(axis=1) + a)
            + (gammaln(n + alpha) - gammaln(alpha)).sum(axis=1))


def mixture(d, iters: int = 100) -> np.ndarray:
    K = d.n_classes
    n = _counts(d)
    active = n.sum(axis=1) > 0
    m = n[active]
    flat = _dirmult(m, np.ones(K))
    crowd = m.sum(axis=0) / m.sum()
    eps, r = 0.5, np.full(m.shape[0], 0.5)
    grid = np.exp(np.linspace(np.log(0.5), np.log(1e4), 60))
    for _ in range(iters):
        c = grid[int(np.argmax([((1 - r) * _dirmult(m, g * crowd)).sum() for g in grid]))]
        z = np.log(eps) + flat - np.log(1 - eps) - _dirmult(m, c * crowd)
        r_new = 1 / (1 + np.exp(-np.clip(z, -500, 500)))
        like = (1 - r_new)[:, None] * m
        crowd = (like.sum(axis=0) + 1) / (like.sum() + K)
        eps = float(np.clip((r_new.sum() + 1) / (r_new.size + 2), 1e-3, 0.999))
        done = np.max(np.abs(r_new - r)) < 1e-8
        r = r_new
        if done:
            break
    rw = np.zeros(d.n_workers)
    rw[active] = r
    soft = rw[d.worker][:, None] * crowd[None, :]
    soft[np.arange(d.label.size), d.label] += 1 - rw[d.worker]
    return _vote(d, d.label, soft)


def run_draw(d) -> dict:
    import crowdkit.aggregation as ck
    import pandas as pd

    known = d.truth >= 0
    K = d.n_classes

    def acc(P):
        return float(np.mean(np.argmax(P, axis=1)[known] == d.truth[known]))

    share = np.bincount(d.label, minlength=K) / d.label.size
    row = {"mv": acc(_vote(d, d.label)), "ck_rule": acc(ck_rule(d)),
           "dirichlet": acc(dirichlet(d, share)),
           "dirichlet_uniform": acc(dirichlet(d, np.full(K, 1.0 / K))),
           "bound": acc(bound(d)), "mixture": acc(mixture(d))}
    df = pd.DataFrame({"task": d.task, "worker": d.worker, "label": d.label})
    for key, name in (("ck_mv", "MajorityVote"), ("ck_ds", "DawidSkene")):
        lab = getattr(ck, name)().fit_predict(df).reindex(range(d.n_tasks)).to_numpy()
        row[key] = float(np.mean(lab[known] == d.truth[known]))
    return row


VARIANTS = ("ck_rule", "dirichlet", "dirichlet_uniform", "bound", "mixture")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated data sets (default: all)")
    args = ap.parse_args(argv)
    root = shared_datasets_dir()
    if root is None:
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    only = [s for s in args.only.split(",") if s]
    for folder in sorted(p for p in root.iterdir() if (p / "truth.csv").exists()):
        if only and folder.name not in only:
            continue
        full = load_dataset(folder)
        rows = [run_draw(subsample(full, 1, seed))
                for seed in [1] + list(range(DRAW_SEED, DRAW_SEED + args.draws))]
        one = rows[0]
        mean = {k: float(np.mean([r[k] for r in rows[1:]])) for k in one} if args.draws \
            else dict(one)
        out: dict = {"set": folder.name, "draw": {k: round(v, 4) for k, v in one.items()},
                     "mean": {k: round(v, 4) for k, v in mean.items()}}
        for tag, r in (("draw", one), ("mean", mean)):
            auto_bar = max(r["mv"], r["ck_mv"], r["ck_ds"]) - TOL
            out[f"{tag}_auto_bar_met"] = [v for v in VARIANTS if r[v] >= auto_bar]
            out[f"{tag}_ds_bar_met"] = [v for v in VARIANTS if r[v] >= r["ck_ds"] - TOL]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
