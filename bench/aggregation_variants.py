"""Issue 21's seventh pass: three candidates for ``auto`` measured and not adopted
(docs/aggregation.md, "Seventh pass").

    nice -n 10 python -m bench.aggregation_variants [--draws 20] [--only bound,cv,average]

* ``bound``: ``bench.one_label``'s ``bound`` at one label per task, with the class prior
  read from the labels of workers who gave two or more different answers (``bound_multi``)
  or iterated without the labels it flips (``bound_iter``), against ``rho`` at the label
  shares (``bound``);
* ``cv``: where ``auto`` picks the weighted vote (2 and 3 labels per task), majority vote
  instead when one common accuracy predicts each label from the task's other labels at
  least as well as the per-worker weights, every weight fitted without that task;
* ``average``: there, the mean of the weighted vote's posterior and an early-stopped
  ``ds``'s (``DawidSkene(max_iter=8)``, cut by its held-out stop).

Subsamples as ``bench.aggregation``: the benchmark's draw (seed = labels per task) and
``--draws`` seeds from 100 (at 2 and 3 labels per task also seeds 11-13; athlete, whose
tasks have categories, left out there). One line of JSON per case: the benchmark's draw,
mean accuracies over all the draws and on how many ``auto``'s bar (max(mv, crowd-kit DS) -
0.005) holds.
Writes nothing.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from labelq.aggregation import get_aggregator
from labelq.aggregation.auto import AutoAggregator, label_agreement
from labelq.aggregation.base import count_matrix
from labelq.aggregation.dawid_skene import DawidSkene
from labelq.datasets import load_dataset, shared_datasets_dir

from . import one_label as ol
from .aggregation import DRAW_SEED, TOL, subsample


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def bound_with(d, rho: np.ndarray, level: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``bench.one_label``'s ``bound`` with the class prior ``rho`` given; (votes, flipped)."""
    label, flip = ol.bound_flips(d, rho, level)
    return ol._vote(d, label), flip


def rho_multi(d) -> np.ndarray:
    n = ol._counts(d)
    m = n[(n > 0).sum(axis=1) >= 2].sum(axis=0)
    return (m + 1) / (m.sum() + d.n_classes)


def rho_iterated(d, iters: int = 10) -> np.ndarray:
    K = d.n_classes
    rho = np.bincount(d.label, minlength=K) / d.label.size
    for _ in range(iters):
        keep = ~bound_with(d, rho)[1]
        m = np.bincount(d.label[keep], minlength=K).astype(float)
        rho = (m + 1) / (m.sum() + K)
    return rho


def cv_prefers_common(d, m: float = AutoAggregator.VOTE_PRIOR) -> bool:
    """Whether one common accuracy predicts each checkable label from the task's other
    labels at least as well as ``auto``'s per-worker weights (fitted without the task)."""
    K, idx = d.n_classes, np.arange(d.task.size)
    counts = count_matrix(d.task, d.label, d.n_tasks, K).toarray()
    others = counts[d.task].copy()  # (for the common accuracy's prediction below)
    others[idx, d.label] -= 1
    checked, agree = label_agreement(d)
    n = np.bincount(d.worker, weights=checked, minlength=d.n_workers)
    a = np.bincount(d.worker, weights=agree, minlength=d.n_workers)
    z = AutoAggregator._common_log_odds(d)
    q = np.exp(z) / (np.exp(z) + K - 1)
    p = np.clip((a[d.worker] - agree + m * q) / (n[d.worker] - checked + m), 1e-3, 1 - 1e-3)
    w = np.maximum(0.0, np.log((K - 1) * p / (1 - p)))
    W = np.zeros((d.n_tasks, K))
    np.add.at(W, (d.task, d.label), w)
    ow = W[d.task].copy()
    ow[idx, d.label] -= w
    sel = checked > 0
    y, rows = d.label[sel], np.arange(int(sel.sum()))

    def loglik(post: np.ndarray, acc: np.ndarray) -> float:
        hit = post[rows, y]
        return float(np.log(hit * acc + (1 - hit) * (1 - acc) / (K - 1)).sum())

    common = loglik(_softmax(z * others[sel]), np.full(rows.size, q))
    return common >= loglik(_softmax(ow[sel]), p[sel])


def _acc(d, labels: np.ndarray) -> float:
    known = d.truth >= 0
    return float(np.mean(labels[known] == d.truth[known]))


def _ck_ds(d) -> float:
    import crowdkit.aggregation as ck
    import pandas as pd

    df = pd.DataFrame({"task": d.task, "worker": d.worker, "label": d.label})
    return _acc(d, ck.DawidSkene().fit_predict(df).reindex(range(d.n_tasks)).to_numpy())


def _summary(case: str, rows: list[dict]) -> dict:
    out: dict = {"case": case, "draws": len(rows)}
    for key in rows[0]:
        out[key] = round(float(np.mean([r[key] for r in rows])), 4)
        if key not in ("mv", "ck_ds"):
            out[f"{key}_bar_met"] = sum(r[key] >= max(r["mv"], r["ck_ds"]) - TOL for r in rows)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--only", default="bound,cv,average")
    args = ap.parse_args(argv)
    root = shared_datasets_dir()
    if root is None:
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    only = set(args.only.split(","))
    draws = list(range(DRAW_SEED, DRAW_SEED + args.draws))
    for folder in sorted(p for p in root.iterdir() if (p / "truth.csv").exists()):
        full = load_dataset(folder)
        if "bound" in only:
            rows = []
            for seed in [1] + draws:
                d = subsample(full, 1, seed)
                share = np.bincount(d.label, minlength=d.n_classes) / d.label.size
                rows.append({"mv": _acc(d, np.argmax(ol._vote(d, d.label), axis=1)),
                             "ck_ds": _ck_ds(d),
                             **{name: _acc(d, np.argmax(bound_with(d, rho)[0], axis=1))
                                for name, rho in (("bound", share),
                                                  ("bound_multi", rho_multi(d)),
                                                  ("bound_iter", rho_iterated(d)))}})
            print(json.dumps({"variant": "bound", "draw": rows[0],
                              **_summary(f"{full.name}@1", rows[1:])}), flush=True)
        if not ({"cv", "average"} & only) or full.name == "athlete":  # (categories)
            continue
        for per in (2, 3):
            rows, first = [], None
            for seed in [per, 11, 12, 13] + draws:
                d = subsample(full, per, seed)
                auto = get_aggregator("auto").fit_data(d)
                if auto.method_ != "wmv" or auto._weights_by_em:
                    continue
                mv = _acc(d, get_aggregator("mv").fit_data(d).labels_)
                row = {"mv": mv, "ck_ds": _ck_ds(d), "auto": _acc(d, auto.labels_)}
                if "cv" in only:
                    row["cv"] = mv if cv_prefers_common(d) else row["auto"]
                if "average" in only:
                    ds8 = DawidSkene(max_iter=8).fit(
                        d.task, d.worker, d.label, n_tasks=d.n_tasks, n_workers=d.n_workers,
                        n_classes=d.n_classes)
                    row["average"] = _acc(d, np.argmax(auto.probas_ + ds8.probas_, axis=1))
                rows.append(row)
                first = row if seed == per else first
            if rows:
                print(json.dumps({"variant": "cv/average", "draw": first,
                                  **_summary(f"{full.name}@{per}", rows)}), flush=True)


if __name__ == "__main__":
    main()
