"""Every registered policy x every shared data set x budgets 2, 3, 5 labels/task: docs/policies.md.

Each cell is the accuracy of a policy at a budget (labels per task) over ``--runs`` runs
(mean ± standard error), with the policy's *best aggregation*: the largest mean of the
policy's own posterior (``predict_proba``), majority vote (``mv``) and Dawid-Skene (``ds``)
over the labels the policy collected — the table says which. The runs are those of
``labelq simulate`` (same seeds: ``--seed`` and run r give the same numbers as
``labelq simulate --seed S``), each policy in its own mode, replaying the data sets in
``--datasets`` (folders with a ``truth.csv``), plus synthetic pools that reproduce the
failures of issue 20 (``SYNTHETIC`` below).

A unit (data set, policy, run) is the expensive part; finished units are appended to a
JSON-lines cache (``--cache``), so an interrupted run resumes where it stopped and
``docs/policies.md`` can be written from a partial cache (missing cells show "…").
The cache lives in the repository (``bench/results/policies.jsonl``, committed with the
table it made), so a later session resumes it instead of spending ~3 CPU hours again;
``--redo SPEC`` drops a policy's cached units (after changing it: a unit's key names the
spec, not the code). Units run in ``--jobs``
processes, policy by policy in the ``--policies`` order (list the cheap ones first) and each
over the smallest data sets first, so a partial run fills whole columns; progress and an ETA
go to stdout.

    nice -n 10 python bench/policies.py --jobs 2 --runs 10 [--policies auto,uniform,...]
    python bench/policies.py --report-only      # rewrite docs/policies.md from the cache

``--gold 0.05`` also runs every cell with gold, as ``labelq simulate --gold 0.05
--gold-schedule SPEC`` does (a seeded sample of the tasks with a truth served as gold
questions by the schedule, ``--gold-schedule``, default ``fixed:rate=0.1``; each gold answer
paid like a label; accuracy on the other tasks), and the report gains a section with each
cell without and with gold side by side. Gold units are cached under their own keys.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine  # noqa: E402
from labelq.errors import LabelqError, PolicyError  # noqa: E402
from labelq.policies import build, names  # noqa: E402
from labelq.simulate.experiment import EnvSource, load_aggregator, run_rngs  # noqa: E402
from labelq.simulate.gold import (  # noqa: E402
    DEFAULT_SCHEDULE,
    GoldRules,
    parse_gold_amount,
    with_gold,
)
from labelq.simulate.runner import expected_accuracy, run_policy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "policies.md"
PLOTS = ROOT / "docs" / "policies"
CACHE = ROOT / "bench" / "results" / "policies.jsonl"
AGGREGATIONS = ("own", "mv", "ds")
# not paper policies for the comparison: ours, and the baselines users would pick instead
PAPER_EXCLUDE = {"uniform", "random", "auto", "overlap", "dynamic-overlap"}

# The two failures issue 20 reports, as synthetic pools (see docs/simulator.md for the keys).
SYNTHETIC = {
    # many prolific near-random workers and a few good ones: optkg-workers' lock-in
    "synthetic-near-random": "tasks=240,workers=50,model=spammer-hammer,share=0.2,"
                             "hammer=0.85,spammer=0.55",
    # categories where workers differ: each worker good on one category, random on the rest
    "synthetic-categories": "tasks=400,categories=4,workers=20,model=spammer-hammer,"
                            "hammer=0.9",
    # issue 34: schools of thought in a dense pool (every worker can label every task); on
    # the decoys (30 %) the bloc (60 % of the workers) agrees on a wrong class, so the
    # majority vote of many labels is wrong there (docs/simulator.md)
    "synthetic-schools": "tasks=240,workers=53,classes=2,model=schools,bloc=0.6,decoys=0.3",
}


@dataclass(frozen=True)
class Unit:
    env: str
    source: EnvSource
    spec: str
    run: int
    seed: int
    budgets_per_task: tuple[float, ...]
    shuffle: bool = True
    gold: str | None = None  # --gold AMOUNT
    gold_schedule: str = DEFAULT_SCHEDULE

    def key(self) -> str:
        return (f"{self.env}|{self.spec}|{self.seed}|{self.run}|"
                f"{','.join(map(str, self.budgets_per_task))}"
                + ("|shuffled" if self.shuffle and self.source.kind == "data" else "")
                + (f"|gold={self.gold}@{self.gold_schedule}" if self.gold else ""))


def run_unit(unit: Unit) -> dict:
    """One run of one policy on one environment; accuracies of own/mv/ds per budget."""
    t0 = time.perf_counter()
    env_rng, rng = run_rngs(unit.seed, unit.run, unit.spec)  # as labelq simulate seeds a run
    env = unit.source.build(env_rng)
    if unit.shuffle:
        env = env.shuffled(env_rng)  # the same order for every policy of this run
    rules = None
    if unit.gold:  # as labelq simulate --gold: drawn after the shuffle, the same per run
        env = with_gold(env, parse_gold_amount(unit.gold), env_rng)
        rules = GoldRules.parse(unit.gold_schedule, None)
    truth = np.where(env.is_gold, -1, env.truth)
    mv, ds = load_aggregator("mv"), load_aggregator("ds")
    extra: list[dict] = []

    def aggregate(task, worker, label, n_tasks, n_classes, gold=None):
        args = (task, worker, label, n_tasks, n_classes)
        extra.append({"mv": expected_accuracy(mv(*args, gold=gold), truth),
                      "ds": expected_accuracy(ds(*args, gold=gold), truth)})
        return np.full((n_tasks, n_classes), 1.0 / n_classes)

    budgets = [b * env.n_tasks for b in unit.budgets_per_task]
    cps = run_policy(build(unit.spec), env, budgets, rng, aggregate=aggregate, gold=rules)
    points = [{"budget_per_task": bpt, "labels": cp.labels, "own": cp.accuracy, **ex}
              for bpt, cp, ex in zip(unit.budgets_per_task, cps, extra, strict=False)]
    if unit.gold:
        for pt, cp in zip(points, cps, strict=True):
            pt["gold_labels"], pt["paused"] = cp.gold_labels, cp.paused
    rec = {"key": unit.key(), "env": unit.env, "spec": unit.spec, "run": unit.run,
           "points": points, "seconds": time.perf_counter() - t0}
    return {**rec, "gold": unit.gold} if unit.gold else rec


def environments(datasets: Path, only: list[str] | None) -> dict[str, EnvSource]:
    envs = {d.name: EnvSource("data", str(d)) for d in sorted(datasets.iterdir())
            if (d / "truth.csv").exists() and (d / "labels.csv").exists()}
    envs.update({k: EnvSource("synthetic", v) for k, v in SYNTHETIC.items()})
    return {k: v for k, v in envs.items() if not only or k in only}


def unsupported(spec: str, source: EnvSource) -> str | None:
    """Why ``spec`` cannot run on ``source`` (e.g. binary only on k classes), else None."""
    env = source.build(np.random.default_rng(0))
    try:
        build(spec).init_state(env.problem())
    except PolicyError as exc:
        return "n/a (binary only)" if env.n_classes > 2 else f"n/a ({exc})"
    return None


def load_cache(path: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["key"]] = rec
    return out


def summarise(records: list[dict], budgets: list[float]) -> dict:
    """{budget: {agg: (mean, se, runs)}} over the runs of one (env, policy)."""
    out: dict = {}
    for b in budgets:
        out[b] = {}
        for agg in AGGREGATIONS:
            vals = np.array([p[agg] for r in records for p in r["points"]
                             if p["budget_per_task"] == b])
            if vals.size:
                se = float(vals.std(ddof=1) / np.sqrt(vals.size)) if vals.size > 1 else 0.0
                out[b][agg] = (float(vals.mean()), se, int(vals.size))
    return out


def best(cell: dict) -> tuple[float, float, str] | None:
    if not cell:
        return None
    agg = max(cell, key=lambda a: cell[a][0])
    return cell[agg][0], cell[agg][1], agg


def report(cache: dict[str, dict], envs: dict[str, EnvSource], specs: list[str],
           budgets: list[float], na: dict[tuple[str, str], str], runs: int,
           header: list[str], plots: bool = True,
           gold: tuple[str, str] | None = None) -> str:
    by: dict[tuple[str, str], list[dict]] = {}
    for rec in cache.values():
        if rec["run"] >= runs or rec["env"] not in envs or rec.get("gold"):
            continue
        by.setdefault((rec["env"], rec["spec"]), []).append(rec)
    summ = {k: summarise(v, budgets) for k, v in by.items()}
    lines = [*header, "", "## Summary: best aggregation per cell", "",
             "Mean accuracy ± s.e. over runs; in brackets the aggregation that gave it "
             "(own posterior, `mv`, `ds`), and the number of runs where fewer than asked "
             "had finished. **Bold**: best policy of the row; … not run yet.", ""]
    cols = ["data set", "labels/task", *specs]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    checks: list[str] = []
    auto_rows = []
    for env in envs:
        for b in budgets:
            cells = {}
            for s in specs:
                if (env, s) in na:
                    cells[s] = None
                else:
                    cells[s] = best(summ.get((env, s), {}).get(b, {}))
            top = max((c[0] for c in cells.values() if c), default=None)
            row = [env, f"{b:g}"]
            for s in specs:
                if (env, s) in na:
                    row.append(na[(env, s)])
                elif cells[s] is None:
                    row.append("…")
                else:
                    m, se, agg = cells[s]
                    n = summ[(env, s)][b][agg][2]
                    txt = f"{m:.3f} ± {se:.3f} ({agg}{'' if n >= runs else f', {n} runs'})"
                    row.append(f"**{txt}**" if top is not None and m >= top - 1e-12 else txt)
            lines.append("| " + " | ".join(row) + " |")
            if "auto" in specs and cells.get("auto") and cells.get("uniform"):
                uni_mv = summ[(env, "uniform")][b].get("mv", (float("nan"),))[0]
                paper = {s: c[0] for s, c in cells.items() if c and s not in PAPER_EXCLUDE}
                top_paper = max(paper, key=lambda s: paper[s]) if paper else "…"
                missing = sum(1 for s in specs if s not in PAPER_EXCLUDE
                              and (env, s) not in na and cells[s] is None)
                auto_rows.append((env, b, cells["auto"][0], summ[(env, "auto")][b]["own"][0],
                                  uni_mv, paper.get(top_paper, float("nan")), top_paper,
                                  missing))
    if auto_rows:
        checks += ["", "## `auto` against the targets of issue 20", "",
                   "`auto` (own posterior and best aggregation) against `uniform` + majority "
                   "vote and the best paper policy (best aggregation) of the cell; "
                   "targets: auto ≥ uniform+mv − 0.005 everywhere, ≥ best paper − 0.005 in "
                   "≥ 80 % of cells, and on average over the data sets at 3 labels/task "
                   "auto ≥ uniform+mv + 0.02.", "",
                   "| data set | labels/task | auto (best) | auto (own) | uniform + mv | "
                   "best paper | vs uniform | vs paper |", "|---|---|---|---|---|---|---|---|"]
        ok_paper = n_paper = 0
        for env, b, a, own, u, p, name, missing in auto_rows:
            vs_paper = "…" if p != p else f"{a - p:+.3f}{'' if a >= p - 0.005 else ' ✗'}"
            if missing and p == p:  # not counted: a paper policy of the row has not run
                vs_paper += f" ({missing} paper {'policy' if missing == 1 else 'policies'} not run)"
            checks.append(f"| {env} | {b:g} | {a:.3f} | {own:.3f} | {u:.3f} | "
                          f"{'…' if p != p else f'{p:.3f} ({name})'} | "
                          f"{a - u:+.3f}{'' if a >= u - 0.005 else ' ✗'} | {vs_paper} |")
            if p == p and not missing:
                ok_paper += a >= p - 0.005
                n_paper += 1
        real = [r for r in auto_rows if not r[0].startswith("synthetic")]
        at3 = [r for r in real if r[1] == 3]
        checks += ["",
                   f"- auto ≥ uniform+mv − 0.005: {sum(r[2] >= r[4] - 0.005 for r in auto_rows)}"
                   f" of {len(auto_rows)} cells",
                   f"- auto ≥ best paper policy − 0.005: {ok_paper} of the {n_paper} cells where "
                   f"every paper policy has run ({100 * ok_paper / max(n_paper, 1):.0f} %)"]
        if at3:
            gain = float(np.mean([r[2] - r[4] for r in at3]))
            checks.append(f"- mean over the {len(at3)} data sets at 3 labels/task: auto − "
                          f"uniform+mv = {gain:+.4f}")
    lines += checks
    if gold:
        lines += gold_section(cache, envs, specs, budgets, na, runs, summ, *gold)
    lines += ["", "## Per data set", "",
              "Each policy's own posterior, `mv` and `ds` at every budget (mean ± s.e.); the "
              "plot shows the best aggregation per point. The first numbers (own posterior, "
              "and `ds`) are what `labelq simulate --data DIR --policy SPEC --budget-per-task "
              "2,3,5 --runs N --aggregate ds` prints.", ""]
    for env, source in envs.items():
        lines += [f"### {env}", "", f"`{source.describe()}`", "",
                  f"![{env}](policies/{env}.png)", ""]
        cols = ["policy"] + [f"{b:g}/task {a}" for b in budgets for a in AGGREGATIONS]
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for s in specs:
            if (env, s) in na:
                lines.append(f"| {s} | " + " | ".join([na[(env, s)]] * (len(cols) - 1)) + " |")
                continue
            row = [s]
            for b in budgets:
                cell = summ.get((env, s), {}).get(b, {})
                for a in AGGREGATIONS:
                    row.append(f"{cell[a][0]:.3f} ± {cell[a][1]:.3f}" if a in cell else "…")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        if plots:
            plot(env, source, specs, budgets, summ, na)
    return "\n".join(lines) + "\n"


def gold_section(cache: dict[str, dict], envs: dict[str, EnvSource], specs: list[str],
                 budgets: list[float], na: dict, runs: int, summ: dict, amount: str,
                 schedule: str) -> list[str]:
    """Each cell without and with gold (``--gold``), side by side (best aggregation)."""
    by: dict[tuple[str, str], list[dict]] = {}
    for rec in cache.values():
        if rec.get("gold") == amount and rec["run"] < runs and rec["env"] in envs:
            by.setdefault((rec["env"], rec["spec"]), []).append(rec)
    with_g = {k: summarise(v, budgets) for k, v in by.items()}
    lines = ["", f"## Without and with gold (`--gold {amount} --gold-schedule {schedule}`)", "",
             f"Each cell: best aggregation without gold → with gold (a seeded sample of "
             f"{amount} of the tasks with a truth served as gold questions by the schedule, "
             "each gold answer paid like a label; accuracy on the other tasks, so the two "
             "differ by the held-out tasks too), and the mean gold answers per run at the "
             "largest budget. … not run yet.", ""]
    cols = ["data set", "labels/task", *specs]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for env in envs:
        for b in budgets:
            row = [env, f"{b:g}"]
            for s in specs:
                if (env, s) in na:
                    row.append(na[(env, s)])
                    continue
                plain = best(summ.get((env, s), {}).get(b, {}))
                gilded = best(with_g.get((env, s), {}).get(b, {}))
                txt = "…" if plain is None else f"{plain[0]:.3f} ({plain[2]})"
                txt += " → " + ("…" if gilded is None else f"{gilded[0]:.3f} ({gilded[2]})")
                if gilded is not None and b == budgets[-1]:
                    n_gold = np.mean([p["gold_labels"] for r in by[(env, s)]
                                      for p in r["points"] if p["budget_per_task"] == b])
                    txt += f", {n_gold:.0f} gold"
                row.append(txt)
            lines.append("| " + " | ".join(row) + " |")
    return lines


def plot(env: str, source: EnvSource, specs: list[str], budgets: list[float], summ: dict,
         na: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.set_prop_cycle(color=plt.cm.tab20(np.linspace(0, 1, 20)))  # one colour per policy
    for s in specs:
        pts = [(b, best(summ.get((env, s), {}).get(b, {}))) for b in budgets]
        pts = [(b, c) for b, c in pts if c]
        if (env, s) in na or not pts:
            continue
        style = {"lw": 2.5, "color": "black"} if s == "auto" else {"lw": 1}
        ax.errorbar([b for b, _ in pts], [c[0] for _, c in pts], yerr=[c[1] for _, c in pts],
                    marker="o", ms=3, capsize=2, label=s, **style)
    ax.set_xlabel("budget (labels per task)")
    ax.set_ylabel("accuracy (best aggregation)")
    ax.set_title(f"{env}: {source.describe()}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    PLOTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOTS / f"{env}.png", dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--only", default="", help="comma-separated environments (default: all)")
    ap.add_argument("--policies", default="", help="comma-separated specs (default: all)")
    ap.add_argument("--budgets", default="2,3,5")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--redo", default="", help="comma-separated specs whose cache is dropped")
    ap.add_argument("--reverse", action="store_true",
                    help="run the units in reverse order (a second process on the same cache "
                         "then works from the other end)")
    ap.add_argument("--order", choices=["shuffled", "file"], default="shuffled",
                    help="replay each run's tasks and workers in a new random order (default), "
                         "or in the data file's order")
    ap.add_argument("--gold", default=None, metavar="FRACTION",
                    help="also run every cell with gold (a share in (0,1) or a count, as "
                         "labelq simulate --gold) and report both side by side")
    ap.add_argument("--gold-schedule", default=DEFAULT_SCHEDULE,
                    help="the gold schedule of --gold (as labelq simulate --gold-schedule)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--no-write", action="store_true",
                    help="print the report instead of writing docs/policies.md and its plots")
    args = ap.parse_args()
    if not args.datasets.is_dir():
        sys.exit(f"--datasets {args.datasets}: not a directory")
    budgets = [float(b) for b in args.budgets.split(",")]
    if args.gold is not None:
        try:
            parse_gold_amount(args.gold)
            GoldRules.parse(args.gold_schedule, None)
        except LabelqError as exc:
            sys.exit(str(exc))
    specs = [s for s in args.policies.split(",") if s] or names()
    envs = environments(args.datasets, [e for e in args.only.split(",") if e] or None)
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    cache = load_cache(args.cache)
    redo = {s for s in args.redo.split(",") if s}
    if redo:
        cache = {k: v for k, v in cache.items() if v["spec"] not in redo}
        args.cache.write_text("".join(json.dumps(v) + "\n" for v in cache.values()))
    na = {(e, s): why for e, src in envs.items() for s in specs
          if (why := unsupported(s, src))}
    every: list[Unit] = []
    by_size = sorted(envs.items(), key=lambda kv: kv[1].n_tasks())
    for s in specs:  # policy by policy, in the order given, each over the smallest sets first
        groups = ([(b,) for b in budgets] if getattr(build(s), "budget_aware", False)
                  else [tuple(budgets)])
        for gold in [None] + ([args.gold] if args.gold is not None else []):
            every += [Unit(e, src, s, r, args.seed, g, args.order == "shuffled", gold,
                           args.gold_schedule)
                      for e, src in by_size if (e, s) not in na for r in range(args.runs)
                      for g in groups]
    wanted = {u.key() for u in every}
    units = [u for u in every if u.key() not in cache]
    if args.reverse:
        units.reverse()
    t_start = time.time()
    if units and not args.report_only:
        print(f"{len(units)} units to run ({len(cache)} cached), jobs={args.jobs}", flush=True)
        ctx = multiprocessing.get_context("spawn")
        with args.cache.open("a") as out, ctx.Pool(max(1, min(args.jobs, len(units)))) as pool:
            for done, rec in enumerate(pool.imap_unordered(run_unit, units), 1):
                out.write(json.dumps(rec) + "\n")
                out.flush()
                cache[rec["key"]] = rec
                el = time.time() - t_start
                print(f"[{done}/{len(units)}] {rec['env']} {rec['spec']} run {rec['run']}: "
                      f"{rec['seconds']:.1f}s; elapsed {el / 60:.1f} min, eta "
                      f"{el / done * (len(units) - done) / 60:.1f} min", flush=True)
    cache = {k: v for k, v in cache.items() if k in wanted}  # this order, seed and budgets
    cpu = sum(r["seconds"] for r in cache.values())
    runs_of: dict[tuple[str, str], set] = {}
    for r in cache.values():
        if not r.get("gold"):  # complete: the cells without gold
            runs_of.setdefault((r["env"], r["spec"]), set()).add(r["run"])
    pairs = sum((e, s) not in na for e in envs for s in specs)
    complete = sum(len({x for x in runs_of.get((e, s), ()) if x < args.runs}) >= args.runs
                   for e in envs for s in specs if (e, s) not in na)
    header = ["# Policies on the shared data sets", "",
              "Written by `bench/policies.py`; rerun the command to refresh it.", "",
              f"Command: `nice -n 10 {command_line().replace(' --report-only', '')}`  ",
              f"Machine: {machine()} (shared with other jobs)  ",
              f"Runs per cell: {args.runs}; wall time of the cached units, summed: "
              f"{cpu / 3600:.2f} hours (several processes at once on a shared machine)  ",
              f"Complete: {complete} of {pairs} (data set, policy) pairs ({args.runs} runs); "
              "the cache resumes the rest (rerun the command)"
              + (f"; this invocation took {(time.time() - t_start) / 60:.1f} min" if units
                 and not args.report_only else ""), "",
              "Data sets: " + ", ".join(f"`{e}`" for e in envs) + ". Synthetic pools: "
              + "; ".join(f"`{k}`: `{v}`" for k, v in SYNTHETIC.items() if k in envs) + ".",
              ("Replays are **shuffled**: each run puts a data set's tasks and workers in a new "
               "random order, the same for every policy of the run, so a policy that breaks "
               "ties by the lowest index gains nothing from a file that lists its best workers "
               "first (`--order file` replays the file's order). "
               if args.order == "shuffled" else
               "Replays keep the data files' order (`--order file`). "),
              "Policies that refuse a data set's number of classes show `n/a`; "
              "a policy stops early when nothing is eligible (e.g. `product` has 3 labels "
              "per task, so its budget 5 is the whole data set)."]
    text = report(cache, envs, specs, budgets, na, args.runs, header, plots=not args.no_write,
                  gold=None if args.gold is None else (args.gold, args.gold_schedule))
    if args.no_write:
        print(text)
    else:
        DOC.write_text(text)
        print(f"wrote {DOC}", flush=True)


if __name__ == "__main__":
    main()
