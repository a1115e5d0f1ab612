"""Aggregation benchmark: labelq vs crowd-kit on every shared data set, plus DS at scale.

Run (from the repository root; crowd-kit is the ``bench`` extra):

    nice -n 10 python -m bench.aggregation [--runs 3] [--big 10000000] [--skip-ck-glad]

For every folder in the shared data sets it fits each labelq method and the matching
crowd-kit 1.4 class on the same labels, and reports accuracy against truth.csv, the expected
calibration error of labelq's confidences (ECE, 15 equal-width bins) and the
median wall time of ``--runs`` runs (crowd-kit's GLAD takes minutes, so it is timed once).
Then the sparse cases: every data set subsampled (seeded) to 1, 2 and 3 labels per task, and
synthetic 10-class pools at 4 labels per task, where labelq's mv, wmv, onecoin, ds and auto
meet crowd-kit's MajorityVote, DawidSkene and MACE, with the issue-21 criteria checked
(auto >= max(majority vote, crowd-kit DS) - 0.005; ds >= crowd-kit DS - 0.005).
``--draws N`` draws every subsampled case N more times and reports the means and how often
each bar holds (one draw of a 108-task set cannot tell a systematic miss from luck).
The time ratio is crowd-kit median / labelq median from the same run of this script. Then it
fits labelq's Dawid-Skene on ``--big`` synthetic labels, reporting time (median of
``--big-runs``) and peak memory (tracemalloc peak during one fit, and the process's max RSS).
The section ``aggregation`` of docs/benchmarks.md is rewritten.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc

import numpy as np

from bench._report import machine, write_section
from labelq.aggregation import get_aggregator
from labelq.datasets import load_dataset, shared_datasets_dir

METHODS = ["mv", "wmv", "ds", "onecoin", "glad", "kos", "ds-category", "auto"]
# labelq method -> crowd-kit class name (None: crowd-kit has no counterpart)
CROWDKIT = {"mv": "MajorityVote", "wmv": "Wawa", "ds": "DawidSkene",
            "onecoin": "OneCoinDawidSkene", "glad": "GLAD", "kos": "KOS", "ds-category": None,
            "auto": None}
SPARSE_METHODS = ["mv", "wmv", "onecoin", "ds", "auto"]
SPARSE_CROWDKIT = ["MajorityVote", "DawidSkene", "MACE"]
TOL = 0.005


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error: bin-weighted |accuracy - mean confidence|."""
    b = np.minimum((confidence * bins).astype(int), bins - 1)
    total = 0.0
    for i in np.unique(b):
        m = b == i
        total += m.mean() * abs(correct[m].mean() - confidence[m].mean())
    return float(total)


def subsample(d, per_task: int, seed: int):
    """``d`` with at most ``per_task`` labels per task, drawn at random (seeded)."""
    from dataclasses import replace

    from labelq.aggregation.base import rank_within_task

    keep = rank_within_task(d.task, np.random.default_rng(seed)) < per_task
    return replace(d, task=d.task[keep], worker=d.worker[keep], label=d.label[keep],
                   name=f"{d.name}@{per_task}")


def sparse_many_class(seed: int, n_tasks: int = 700, n_workers: int = 44, n_classes: int = 10,
                      per_task: int = 4):
    """The issue's unseen 10-class set, made up: 700 tasks, 44 workers with accuracy
    U(0.35, 0.95) and uneven confusions, Pareto-skewed workloads, 4 labels per task."""
    from labelq.datasets import LabelData

    rng = np.random.default_rng(seed)
    K = n_classes
    truth = rng.choice(K, n_tasks, p=rng.dirichlet(np.ones(K) * 2))
    conf = np.empty((n_workers, K, K))
    for j in range(n_workers):
        a = rng.uniform(0.35, 0.95)
        for k in range(K):
            conf[j, k] = np.insert(rng.dirichlet(np.ones(K - 1) * 0.5) * (1 - a), k, a)
    activity = rng.pareto(1.0, n_workers) + 1
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False,
                                        p=activity / activity.sum()) for _ in range(n_tasks)])
    cum = conf[worker, truth[task]].cumsum(axis=1)
    label = np.minimum((rng.random(task.size)[:, None] > cum).sum(axis=1), K - 1)
    return LabelData(name=f"synthetic-10class-{seed}", task=task, worker=worker, label=label,
                     truth=truth, classes=[str(k) for k in range(K)],
                     tasks=[str(i) for i in range(n_tasks)],
                     workers=[str(j) for j in range(n_workers)])


def run_sparse(d) -> dict:
    """labelq's sparse candidates and crowd-kit's MV, DS and MACE on one (sub)sample."""
    import crowdkit.aggregation as ck
    import pandas as pd

    known = d.truth >= 0
    row: dict = {"name": d.name, "lpt": d.task.size / max(np.unique(d.task).size, 1)}
    for m in SPARSE_METHODS:
        res = get_aggregator(m).fit_data(d)
        correct = res.labels_[known] == d.truth[known]
        row[m] = float(correct.mean())
        row[f"{m}_ece"] = ece(res.confidence_[known], correct)
        if m == "auto":
            row["chosen"] = res.method_
    df = pd.DataFrame({"task": d.task, "worker": d.worker, "label": d.label})
    for name in SPARSE_CROWDKIT:
        kw = {"random_state": 0} if name == "MACE" else {}
        try:
            pred = getattr(ck, name)(**kw).fit_predict(df)
        except Exception as exc:  # noqa: BLE001 - report, do not hide, a crowd-kit failure
            row[name] = None
            row[f"{name}_error"] = type(exc).__name__
            continue
        lab = pred.reindex(range(d.n_tasks)).to_numpy()
        row[name] = float(np.mean(lab[known] == d.truth[known]))
    base = max(row["mv"], row["MajorityVote"] or 0, row["DawidSkene"] or 0)
    row["auto_ok"] = row["auto"] >= base - TOL
    row["ds_ok"] = row["DawidSkene"] is None or row["ds"] >= row["DawidSkene"] - TOL
    return row


#: first subsample seed of ``--draws`` (the table's own draws use seed = labels per task)
DRAW_SEED = 100


def run_draws(d, per_task: int, n: int) -> dict:
    """Mean accuracy of labelq's mv, auto and ds and crowd-kit's MajorityVote and DawidSkene
    over ``n`` subsamples of ``d`` at ``per_task`` labels per task (seeds ``DRAW_SEED`` ...),
    and on how many draws each issue-21 bar is met. A single draw cannot tell a systematic
    miss from the draw's luck: on a set of 108 tasks one task is 0.009 of accuracy, more
    than the bar's tolerance, so "auto >= max(mv, crowd-kit DS) - 0.005" on one draw asks
    auto never to be one task behind the luckier of two other methods."""
    import crowdkit.aggregation as ck
    import pandas as pd

    known = d.truth >= 0
    acc = {k: [] for k in ("mv", "auto", "ds", "MajorityVote", "DawidSkene")}
    auto_ok = ds_ok = 0
    for seed in range(DRAW_SEED, DRAW_SEED + n):
        s = subsample(d, per_task, seed)
        for m in ("mv", "auto", "ds"):
            acc[m].append(float(np.mean(get_aggregator(m).fit_data(s).labels_[known]
                                        == s.truth[known])))
        df = pd.DataFrame({"task": s.task, "worker": s.worker, "label": s.label})
        for name in ("MajorityVote", "DawidSkene"):
            lab = getattr(ck, name)().fit_predict(df).reindex(range(s.n_tasks)).to_numpy()
            acc[name].append(float(np.mean(lab[known] == s.truth[known])))
        auto_ok += acc["auto"][-1] >= max(acc["mv"][-1], acc["MajorityVote"][-1],
                                          acc["DawidSkene"][-1]) - TOL
        ds_ok += acc["ds"][-1] >= acc["DawidSkene"][-1] - TOL
    mean = {k: float(np.mean(v)) for k, v in acc.items()}
    return {"name": f"{d.name}@{per_task}", "n": n, "one_task": 1 / int(known.sum()), **mean,
            "auto_ok": auto_ok, "ds_ok": ds_ok,
            "auto_mean_ok": mean["auto"] >= max(mean["mv"], mean["MajorityVote"],
                                                mean["DawidSkene"]) - TOL,
            "ds_mean_ok": mean["ds"] >= mean["DawidSkene"] - TOL}


def render_draws(rows: list[dict]) -> list[str]:
    n = rows[0]["n"]
    lines = [
        f"### Sparse: mean over {n} draws", "",
        f"The same cases drawn {n} more times (`--draws {n}`: `subsample` seeds "
        f"{DRAW_SEED}-{DRAW_SEED + n - 1}; crowd-kit refitted on each). Mean accuracy; "
        "*bar met*: on how many draws the case's bar holds (as above); ✓/✗: the bar on the "
        "means. *one task*: the accuracy one task is worth — where it exceeds the tolerance "
        "(0.005), a single draw's bar says \"never one task behind\".", "",
        f"auto meets its bar on the means in {sum(r['auto_mean_ok'] for r in rows)} of "
        f"{len(rows)} cases, ds in {sum(r['ds_mean_ok'] for r in rows)} of {len(rows)}.", "",
        "| case | one task | mv | auto | ds | ck MV | ck DS | auto bar met | ds bar met "
        "| auto ✓ (means) | ds ✓ (means) |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['one_task']:.4f} | {fmt(r['mv'])} | {fmt(r['auto'])} | "
            f"{fmt(r['ds'])} | {fmt(r['MajorityVote'])} | {fmt(r['DawidSkene'])} | "
            f"{r['auto_ok']}/{n} | {r['ds_ok']}/{n} | {'✓' if r['auto_mean_ok'] else '✗'} | "
            f"{'✓' if r['ds_mean_ok'] else '✗'} |")
    return lines + [""]


def timed(fn, runs: int):
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def run_dataset(d, runs: int, skip_ck_glad: bool) -> list[dict]:
    import crowdkit.aggregation as ck
    import pandas as pd

    df = pd.DataFrame({"task": d.task, "worker": d.worker, "label": d.label})
    known = d.truth >= 0
    rows = []
    for m in METHODS:
        row = {"method": m}
        if m == "kos" and d.n_classes != 2:
            rows.append({**row, "skip": "binary only"})
            continue
        res, t_ours = timed(lambda: get_aggregator(m).fit_data(d), runs)
        correct = res.labels_[known] == d.truth[known]
        row.update(acc=d.accuracy(res.labels_), t=t_ours,
                   ece=ece(res.confidence_[known], correct))
        if m == "auto":
            row["chosen"] = res.method_
        name = CROWDKIT[m]
        if name and not (m == "glad" and skip_ck_glad):
            n = 1 if m == "glad" else runs
            try:
                pred, t_ck = timed(lambda: getattr(ck, name)().fit_predict(df), n)
            except Exception as exc:  # noqa: BLE001 - report, do not hide, a crowd-kit failure
                row["ck_error"] = f"{type(exc).__name__}"
            else:
                lab = pred.reindex(range(d.n_tasks)).to_numpy()
                row.update(ck_acc=float(np.mean(lab[known] == d.truth[known])), ck_t=t_ck,
                           ck_runs=n)
        rows.append(row)
    try:
        pred, t_ck = timed(lambda: ck.MACE(random_state=0).fit_predict(df), 1)
    except Exception as exc:  # noqa: BLE001
        rows.append({"method": "MACE", "ck_only": True, "ck_error": type(exc).__name__})
    else:
        lab = pred.reindex(range(d.n_tasks)).to_numpy()
        rows.append({"method": "MACE", "ck_only": True, "ck_t": t_ck,
                     "ck_acc": float(np.mean(lab[known] == d.truth[known]))})
    return rows


def synthetic(n_labels: int, seed: int = 0, per_task: int = 10, n_workers: int = 2000,
              n_classes: int = 2):
    """Binary crowd: workers with accuracy U(0.55, 0.95), ``per_task`` labels per task."""
    rng = np.random.default_rng(seed)
    n_tasks = n_labels // per_task
    truth = rng.integers(0, n_classes, n_tasks)
    acc = rng.uniform(0.55, 0.95, n_workers)
    task = np.repeat(np.arange(n_tasks, dtype=np.int64), per_task)
    worker = rng.integers(0, n_workers, task.size)
    right = rng.random(task.size) < acc[worker]
    wrong = (truth[task] + rng.integers(1, n_classes, task.size)) % n_classes
    label = np.where(right, truth[task], wrong)
    return task, worker, label, truth


def run_big(n_labels: int, runs: int) -> dict:
    task, worker, label, truth = synthetic(n_labels)
    fit = lambda: get_aggregator("ds").fit(task, worker, label)  # noqa: E731
    res, t = timed(fit, runs)
    tracemalloc.start()
    fit()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"n": n_labels, "t": t, "runs": runs, "acc": float(np.mean(res.labels_ == truth)),
            "iters": res.n_iter_, "peak_mb": peak / 2**20, "rss_mb": rss}


def fmt(x, spec=".4f"):
    return "—" if x is None else format(x, spec)


def render_sparse(rows: list[dict]) -> list[str]:
    ok_auto = sum(r["auto_ok"] for r in rows)
    ok_ds = sum(r["ds_ok"] for r in rows)
    lines = [
        "### Sparse: subsampled data sets and synthetic 10-class pools", "",
        "Every shared data set with at most 1, 2 or 3 labels per task kept at random "
        "(`subsample`, seed = labels per task; the full set's `@3` equals it where it has 3), "
        "and three synthetic pools like the issue's unseen 10-class set (700 tasks, 44 "
        "workers, 4 labels per task; `sparse_many_class`, seeds 0-2). Accuracy; auto's "
        "choice in brackets; ECE of auto's and ds's confidence. ✓/✗: auto >= max(mv, "
        "crowd-kit MV, crowd-kit DS) - 0.005, and ds >= crowd-kit DS - 0.005.", "",
        f"auto meets its bar on {ok_auto} of {len(rows)} cases, ds on {ok_ds} of "
        f"{len(rows)}.", "",
        "| case | labels/task | mv | wmv | onecoin | ds | auto | ck MV | ck DS | ck MACE "
        "| auto ECE | ds ECE | auto ✓ | ds ✓ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ck = [fmt(r[n]) if r[n] is not None else f"fails ({r[n + '_error']})"
              for n in SPARSE_CROWDKIT]
        lines.append(
            f"| {r['name']} | {r['lpt']:.1f} | {fmt(r['mv'])} | {fmt(r['wmv'])} | "
            f"{fmt(r['onecoin'])} | {fmt(r['ds'])} | {fmt(r['auto'])} ({r['chosen']}) | "
            f"{' | '.join(ck)} | {fmt(r['auto_ece'], '.3f')} | {fmt(r['ds_ece'], '.3f')} | "
            f"{'✓' if r['auto_ok'] else '✗'} | {'✓' if r['ds_ok'] else '✗'} |")
    return lines + [""]


def render(results: dict, big: dict | None, args, sparse: list[dict] | None = None,
           draws: list[dict] | None = None) -> str:
    lines = [
        "## Aggregation (labelq vs crowd-kit)", "",
        f"Command: `python -m bench.aggregation {' '.join(sys.argv[1:])}` "
        "(run under `nice -n 10`)  ",
        f"Machine: {machine()} (shared with other jobs).", "",
        f"Accuracy against truth.csv; ECE = expected calibration error of labelq's "
        f"confidence (15 bins); time = median of {args.runs} runs (crowd-kit GLAD and MACE: 1 "
        "run); ratio = crowd-kit time / labelq time, both measured in this run. crowd-kit "
        "counterparts: mv=MajorityVote, wmv=Wawa, ds=DawidSkene, onecoin=OneCoinDawidSkene, "
        "glad=GLAD, kos=KOS; ds-category and auto have none (auto's choice in brackets); "
        "MACE is crowd-kit only.", "",
    ]
    if args.skip_ck_glad:
        lines += ["crowd-kit GLAD was not run (`--skip-ck-glad`: it takes minutes per data set); "
                  "its accuracy and times are in ALGORITHMS.md §6.", ""]
    for name, rows in results.items():
        lines += [f"### {name}", "",
                  "| method | labelq acc | ECE | crowd-kit acc | labelq time (s) "
                  "| crowd-kit time (s) | speed-up |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            if "skip" in r:
                lines.append(f"| {r['method']} | — ({r['skip']}) | | | | | |")
                continue
            ratio = r["ck_t"] / r["t"] if "ck_t" in r and "t" in r else None
            ck_acc = f"fails ({r['ck_error']})" if "ck_error" in r else fmt(r.get("ck_acc"))
            name = r["method"] + (f" ({r['chosen']})" if "chosen" in r else "")
            lines.append(f"| {name} | {fmt(r.get('acc'))} | {fmt(r.get('ece'), '.3f')} | "
                         f"{ck_acc} | {fmt(r.get('t'), '.4f')} | {fmt(r.get('ck_t'), '.3f')} | "
                         f"{fmt(ratio, '.1f')}{'×' if ratio else ''} |")
        lines.append("")
    if sparse:
        lines += render_sparse(sparse)
    if draws:
        lines += render_draws(draws)
    if big:
        lines += ["### Dawid-Skene at scale", "",
                  f"{big['n']:,} synthetic binary labels (10 per task, 2,000 workers with accuracy "
                  f"U(0.55, 0.95)): fit time {big['t']:.1f} s (median of {big['runs']}), "
                  f"{big['iters']} EM iterations, accuracy {big['acc']:.4f}; peak traced memory "
                  f"during one fit {big['peak_mb']:.0f} MiB (tracemalloc), process max RSS "
                  f"{big['rss_mb']:.0f} MiB (includes the generated data set). Target: < 60 s.",
                  ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", type=int, default=10_000_000, help="0 skips the scale run")
    ap.add_argument("--big-runs", type=int, default=3)
    ap.add_argument("--skip-ck-glad", action="store_true")
    ap.add_argument("--only", nargs="*", help="data set names (default: all)")
    ap.add_argument("--no-sparse", action="store_true",
                    help="skip the subsampled and synthetic sparse cases")
    ap.add_argument("--draws", type=int, default=0,
                    help="also draw every subsampled case this many more times and report "
                         "the means (crowd-kit MV and DS refitted on each; default 0)")
    ap.add_argument("--gold-study", action="store_true",
                    help="only issue 33's table (bench/aggregation_gold.py): no gold, 30 "
                         "random and 30 suggested gold answers, ECE and the accuracy interval")
    ap.add_argument("--gold-n", type=int, default=30)
    ap.add_argument("--gold-draws", type=int, default=5)
    ap.add_argument("--schools", type=int, default=10, help="--gold-study: task sets of the "
                    "schools pool (issue 34's dense pool), suggested against random gold; 0 "
                    "skips it")
    ap.add_argument("--curve", default="bluebirds,zencrowd_in,trec2011_crowd,web,schools",
                    help="--gold-study: data sets for the gold-answers curve (n = 5..50 "
                         "suggested vs random; 'schools': the schools pool, all labels; "
                         "empty skips it)")
    ap.add_argument("--lpt", default="3", help="--gold-study: labels per task of the "
                    "subsampled cases (comma-separated; empty: full sets only)")
    args = ap.parse_args(argv)
    root = shared_datasets_dir()
    if root is None:
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    if args.gold_study:
        gold_study(root, args)
        return
    results = {}
    for folder in sorted(p for p in root.iterdir() if (p / "truth.csv").exists()):
        if args.only and folder.name not in args.only:
            continue
        d = load_dataset(folder)
        results[d.name] = run_dataset(d, args.runs, args.skip_ck_glad)
        print(d.name, [(r["method"], fmt(r.get("acc")), fmt(r.get("ck_acc"))) for r in
                       results[d.name]], flush=True)
    sparse = []
    if not args.no_sparse:
        cases = [subsample(load_dataset(root / name), r, seed=r)
                 for name in sorted(results) for r in (1, 2, 3)]
        cases += [sparse_many_class(seed) for seed in range(3)]
        for d in cases:
            sparse.append(run_sparse(d))
            print(sparse[-1], flush=True)
    draws = []
    if args.draws > 0 and not args.no_sparse:
        for name in sorted(results):
            d = load_dataset(root / name)
            for r in (1, 2, 3):
                draws.append(run_draws(d, r, args.draws))
                print(draws[-1], flush=True)
    big = run_big(args.big, args.big_runs) if args.big else None
    if big:
        print("big", big, flush=True)
    write_section("aggregation", render(results, big, args, sparse, draws))


def gold_study(root, args) -> None:
    from bench._report import command_line
    from bench.aggregation_gold import render as render_gold
    from bench.aggregation_gold import run_case

    rows = []
    lpts = [int(x) for x in args.lpt.split(",") if x.strip()]
    for folder in sorted(p for p in root.iterdir() if (p / "truth.csv").exists()):
        if args.only and folder.name not in args.only:
            continue
        d = load_dataset(folder)
        if not (d.truth >= 0).any():
            continue  # no task of the labels has a truth (ds1979 names none of them)
        for case in [d] + [subsample(d, r, seed=100 + r) for r in lpts]:
            rows.append(run_case(case, args.gold_n, args.gold_draws))
            r = rows[-1]
            print(case.name, {k: (r[k]["mv"], r[k]["best"], r[k]["auto"], r[k]["chosen"],
                                  round(r[k]["ece"], 3), r[k]["covered"])
                              for k in ("none", "random", "suggested")}, flush=True)
    text = render_gold(rows, command_line(), machine(), args.gold_n, args.gold_draws)
    if args.schools:
        from bench.aggregation_gold import render_schools, run_schools

        sch = {}
        for k in (5, 10, 0):
            sch[k] = run_schools(args.schools, args.gold_n, k)
            print("schools", k, sch[k], flush=True)
        text += "\n" + render_schools(sch, args.schools, args.gold_n)
    if args.curve:
        from bench.aggregation_gold import render_curve, run_curve, schools_labels

        curve = []
        for name in args.curve.split(","):
            d = schools_labels(0, 0) if name == "schools" else load_dataset(root / name)
            curve.append(run_curve(d, args.gold_draws))
            print("curve", curve[-1], flush=True)
        text += "\n" + render_curve(curve, args.gold_draws)
    write_section("aggregation-gold", text)


if __name__ == "__main__":
    main()
