"""Gold on suspicion and fair pauses in the demo: how many careless annotators the quality
rule pauses, how many annotators at or above its bar it pauses wrongly, and what the gold
costs.

Two parts, both written to the section ``gold-suspicion`` of docs/benchmarks.md:

* a direct simulation (:func:`simulate`, vectorised numpy, a second or two): the demo's
  annotators (:func:`demo_accuracies`, drawn by ``cli.demo._pool``) give ``budget / workers``
  labels each; the demo's gold schedule decides which are gold (its first ``n`` gold, then
  its decaying rate, raised to ``suspect`` while the gold record or the agreement record is
  suspect, never more gold answers than the pool holds: a worker never gets the same gold
  twice); a gold answer is right with the annotator's accuracy, a non-gold label is judged
  right by agreement with the same probability (an idealised worker model), and the quality
  rule is looked at after *every* gold answer, as often as the live applier can look (it
  looks after each batch, so at most as often). Over ``--sim-seeds`` seeds: the false-pause
  rate (annotators whose true accuracy is at or above the bar who get paused), at the demo's
  accuracies and for annotators exactly at the bar over the whole gold pool (the most looks
  the demo allows), and the careless catch rate, each with its standard error, for the
  demo's rule and the ones it could have used (:func:`sim_table`), and for the demo's rule
  under each source of suspicion, with the records read at once and ``LAG`` labels late
  (:func:`suspicion_table`);
* the real demo, ``labelq demo --seed S --gold-schedule SPEC`` for each seed and each
  schedule (with and without ``suspect``, alternated, on this machine's Redis when
  ``LABELQ_REDIS_URL`` is set, else the demo's own). The demo's annotators work in threads
  against a live Celery worker, so one seed does not give one outcome: the counts are over
  the runs, not per seed.

    python bench/gold_suspicion.py --seeds 10 --sim-seeds 2000
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench._report import command_line, machine, write_section  # noqa: E402
from cli.demo import CARELESS_ACCURACY, GOLD_POOL, GOLD_SCHEDULE, QUALITY, _pool  # noqa: E402
from labelq.gold.quality import QualityRule  # noqa: E402
from labelq.gold.schedules import FixedRate, OnboardingDecay, schedule_from_spec  # noqa: E402
from labelq.gold.scoring import GoldScores  # noqa: E402

WITHOUT = re.sub(r",suspect=[^,]*|,suspect_below=[^,]*", "", GOLD_SCHEDULE)
_PAUSED = re.compile(r"paused (\d+) of the (\d+) careless annotators and (\d+) of the (\d+) "
                     r"others")
_LABELS = re.compile(r"(\d+) labels \((\d+) on gold\)")
_POSTERIOR = re.compile(r"posterior \(\w+\)\s+([0-9.]+)")

# the demo's defaults (cli/demo.py's options): 12 annotators of whom 2 careless, 3 categories,
# GOLD_POOL (100) gold questions, a budget of 4 labels per task on 300 tasks
DEMO = {"workers": 12, "careless": 2, "categories": 3, "gold": GOLD_POOL, "labels": 1200 // 12}
# the demo's schedule before issue 41 (suspicion on the gold record, with a pool of 40)
BEFORE_41 = GOLD_SCHEDULE.replace("suspect=1", "suspect=0.5")
SUSPECT_09 = GOLD_SCHEDULE.replace("suspect=1", "suspect=0.9")
# where suspicion comes from: (schedule, gold pool, agreement evidence)
SUSPICION = {
    "none": (WITHOUT, GOLD_POOL, False),
    "gold record, suspect 0.5, 40 gold (the demo before issue 41)": (BEFORE_41, 40, False),
    f"gold record, suspect 0.9, {GOLD_POOL} gold": (SUSPECT_09, GOLD_POOL, False),
    f"gold record and agreement, suspect 0.9, {GOLD_POOL} gold": (SUSPECT_09, GOLD_POOL, True),
    f"gold record, suspect 1, {GOLD_POOL} gold": (GOLD_SCHEDULE, GOLD_POOL, False),
    f"gold record and agreement, suspect 1, {GOLD_POOL} gold (the demo)":
        (GOLD_SCHEDULE, GOLD_POOL, True),
}
LAG = 30  # labels: how late issue 34 found the live records (the applier, the held inbox)


def demo_accuracies(seeds: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, careless) of ``seeds`` demo workforces, stacked: each annotator's true
    accuracy as the demo reports it (the mean over categories of ``cli.demo._pool``'s draw;
    with gold of each category equally likely, a gold answer is right with that probability)."""
    n, k = DEMO["workers"], DEMO["careless"]
    acc = np.concatenate([_pool(n, k, DEMO["categories"], rng).accuracy().mean(axis=1)
                          for _ in range(seeds)])
    careless = np.tile(np.arange(n) >= n - k, seeds)
    return acc, careless


def _gold_rate(schedule: object, t: int, right: np.ndarray, answered: np.ndarray,
               agree: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Each worker's chance that its label number ``t`` (0-based) is gold, vectorised:
    ``fixed`` and ``onboarding``, raised to ``suspect`` while (c + 1) / (n + 2) is below
    ``suspect_below`` on the gold record or on the agreement record ``agree`` (right,
    checked) (labelq.gold.schedules.raised_if_suspect)."""
    if isinstance(schedule, OnboardingDecay):
        base = schedule.rate_at(t)
    elif isinstance(schedule, FixedRate):
        base = schedule.rate
    else:
        raise ValueError(f"simulate takes fixed or onboarding schedules, not {schedule!r}")
    rate = np.full(right.shape, base)
    if schedule.suspect > 0:
        suspect = (answered > 0) & ((right + 1) / (answered + 2) < schedule.suspect_below)
        if agree is not None:
            a_right, a_checked = agree
            suspect |= (a_checked > 0) & ((a_right + 1) / (a_checked + 2)
                                          < schedule.suspect_below)
        rate[suspect] = np.maximum(rate[suspect], schedule.suspect)
    return rate


def simulate(rule: QualityRule, accuracy: np.ndarray, rng: np.random.Generator, *,
             schedule: str | None = GOLD_SCHEDULE, labels: int = DEMO["labels"],
             pool: int = DEMO["gold"], agreement: bool = True,
             lag: int = 0) -> dict[str, np.ndarray]:
    """Each worker gives ``labels`` labels (fewer once paused); which are gold follows
    ``schedule`` (``None``: every label is gold), at most ``pool`` gold answers; each gold
    answer is right with probability ``accuracy`` and the rule is looked at after every one.
    With ``agreement``, each non-gold label is also checked by agreement, judged right with
    probability ``accuracy`` (a worker model that measures accuracy without bias; the
    real one is noisier), gold answers count in that record too (as in ``auto``'s worker
    model and the SQL agreement record), and the agreement record makes a suspect too. ``lag``: the
    records the schedule reads are those of ``lag`` labels before (the live applier's
    delay and the held inbox). Returns per worker ``paused``, ``gold`` (gold answers
    given) and ``given`` (labels)."""
    w = len(accuracy)
    sched = schedule_from_spec(schedule) if schedule else None
    right, answered = np.zeros(w), np.zeros(w)
    a_right, a_checked = np.zeros(w), np.zeros(w)
    history: list[tuple[np.ndarray, ...]] = []
    paused, given = np.zeros(w, bool), np.zeros(w, int)
    for t in range(labels):
        active = ~paused
        given += active
        history.append((right.copy(), answered.copy(), a_right.copy(), a_checked.copy()))
        if len(history) > lag + 1:
            history.pop(0)
        seen = history[0]  # the records as they were ``lag`` labels ago
        rate = (_gold_rate(sched, t, seen[0], seen[1], (seen[2], seen[3]) if agreement
                           else None) if sched is not None else np.ones(w))
        drawn = rng.random(w) < rate
        gold = np.flatnonzero(active & (answered < pool) & drawn)
        if agreement:
            task = np.flatnonzero(active & ~((answered < pool) & drawn))
            a_checked[task] += 1
            a_right[task] += rng.random(task.size) < accuracy[task]
        if not gold.size:
            continue
        answered[gold] += 1
        hit = rng.random(gold.size) < accuracy[gold]
        right[gold] += hit
        if agreement:  # gold answers count in the agreement record too (as in labelq's)
            a_checked[gold] += 1
            a_right[gold] += hit
        scores = GoldScores(right[gold, None], answered[gold, None])
        paused[gold[rule.pause_mask(scores)]] = True
    return {"paused": paused, "gold": answered.astype(int), "given": given}


def rate(flags: np.ndarray) -> tuple[float, float]:
    """Share of True and its binomial standard error."""
    p = float(np.mean(flags))
    return p, float(np.sqrt(p * (1 - p) / max(len(flags), 1)))


RULES = {  # the demo's rule before issue 34, the rule it uses now, and two between
    "posterior, confidence 0.95 (before)": {"threshold": 0.6, "min_gold": 8,
                                            "confidence": 0.95},
    "posterior, confidence 0.99": {"threshold": 0.6, "min_gold": 8, "confidence": 0.99},
    "sequential, confidence 0.95": {"threshold": 0.6, "min_gold": 8, "confidence": 0.95,
                                    "rule": "sequential"},
    "sequential, confidence 0.99": {"threshold": 0.6, "min_gold": 8, "confidence": 0.99,
                                    "rule": "sequential"},
}


def sim_table(seeds: int, seed: int = 0) -> list[str]:
    """Markdown rows: for each rule, the false-pause rates and the careless catch rate."""
    acc, careless = demo_accuracies(seeds, np.random.default_rng(seed))
    at_bar = np.full(seeds * DEMO["workers"], QUALITY["threshold"])
    rows = ["| quality rule (threshold 0.6, min_gold 8) | false pauses, demo's skilled "
            "annotators | false pauses at the bar, demo schedule | false pauses at the "
            f"bar, all {DEMO['gold']} gold looked at | careless annotators caught | their gold answers "
            "when caught (median) | gold share of labels |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, params in RULES.items():
        rule = QualityRule(**params)
        demo = simulate(rule, acc, np.random.default_rng(seed + 1))
        bar = simulate(rule, at_bar, np.random.default_rng(seed + 2))
        worst = simulate(rule, at_bar, np.random.default_rng(seed + 3), schedule=None,
                         labels=DEMO["gold"])
        skilled = acc >= QUALITY["threshold"]  # every non-careless demo annotator
        caught = demo["paused"] & careless
        cells = [rate(demo["paused"][skilled & ~careless]), rate(bar["paused"]),
                 rate(worst["paused"]), rate(demo["paused"][careless])]
        when = np.median(demo["gold"][caught]) if caught.any() else float("nan")
        rows.append(f"| {name}{' (the demo)' if params == QUALITY else ''} | "
                    + " | ".join(f"{p:.2%} ± {se:.2%}" for p, se in cells)
                    + f" | {when:g} | {demo['gold'].sum() / demo['given'].sum():.1%} |")
    return rows


def suspicion_table(seeds: int, seed: int = 0) -> list[str]:
    """Markdown rows: the demo's rule under each source of suspicion (:data:`SUSPICION`):
    careless annotators caught with the records read at once and ``LAG`` labels late,
    false pauses at the bar and of the demo's skilled annotators, gold share."""
    rule = QualityRule(**QUALITY)
    acc, careless = demo_accuracies(seeds, np.random.default_rng(seed))
    at_bar = np.full(seeds * DEMO["workers"], QUALITY["threshold"])
    rows = ["| suspicion | careless caught, records at once | careless caught, records "
            f"{LAG} labels late | their gold answers when caught (median, late) | false "
            "pauses at the bar (late) | false pauses, demo's skilled annotators (late) | "
            "gold share of labels: demo (late) | at the bar (late) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, (schedule, pool, agreement) in SUSPICION.items():
        kw = {"schedule": schedule, "pool": pool, "agreement": agreement}
        now = simulate(rule, acc, np.random.default_rng(seed + 1), **kw)
        late = simulate(rule, acc, np.random.default_rng(seed + 1), lag=LAG, **kw)
        bar = simulate(rule, at_bar, np.random.default_rng(seed + 2), lag=LAG, **kw)
        skilled = ~careless
        caught = late["paused"] & careless
        when = np.median(late["gold"][caught]) if caught.any() else float("nan")
        cells = [rate(now["paused"][careless]), rate(late["paused"][careless])]
        rows.append(f"| {name} | " + " | ".join(f"{p:.1%} ± {se:.1%}" for p, se in cells)
                    + f" | {when:g} | "
                    + " | ".join(f"{p:.2%} ± {se:.2%}" for p, se in
                                 (rate(bar["paused"]), rate(late["paused"][skilled])))
                    + f" | {late['gold'].sum() / late['given'].sum():.1%} | "
                    f"{bar['gold'].sum() / bar['given'].sum():.1%} |")
    return rows


def one(seed: int, schedule: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "cli.main", "demo", "--seed", str(seed),
                          "--gold-schedule", schedule], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=True).stdout
    paused, labels, acc = _PAUSED.search(out), _LABELS.search(out), _POSTERIOR.search(out)
    if not (paused and labels and acc):
        raise SystemExit(f"unexpected demo output:\n{out}")
    return {"careless": int(paused[1]), "n_careless": int(paused[2]),
            "others": int(paused[3]), "n_others": int(paused[4]),
            "labels": int(labels[1]), "gold": int(labels[2]), "accuracy": float(acc[1])}


def _rule_words(params: dict) -> str:
    return (f"{params.get('rule', 'posterior')} rule, threshold {params['threshold']}, "
            f"confidence {params['confidence']}, min_gold {params['min_gold']}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10, help="demo seeds 0..N-1")
    ap.add_argument("--sim-seeds", type=int, default=2000,
                    help="simulated demo workforces (12 annotators each)")
    ap.add_argument("--section", default="gold-suspicion")
    args = ap.parse_args()
    sim = sim_table(args.sim_seeds)
    print("\n".join(sim), flush=True)
    sus = suspicion_table(args.sim_seeds)
    print("\n".join(sus), flush=True)
    runs: dict[str, list[dict]] = {WITHOUT: [], GOLD_SCHEDULE: []}
    for seed in range(args.seeds):
        for schedule in runs:
            runs[schedule].append(one(seed, schedule))
            r = runs[schedule][-1]
            print(f"seed {seed} {schedule}: {r}", flush=True)
    n_sim = args.sim_seeds * DEMO["workers"]
    lines = ["## Gold on suspicion and fair pauses in the demo (`bench/gold_suspicion.py`)", "",
             f"Command: `{command_line()}`", "", f"Machine: {machine()}.", "",
             f"**Simulated** ({args.sim_seeds:,} demo workforces of 12 annotators, "
             f"{n_sim:,} annotators, seed 0; `simulate`): each annotator gives "
             f"{DEMO['labels']} labels (the budget's share), which are gold as the demo's "
             f"schedule `{GOLD_SCHEDULE}` decides, at most {DEMO['gold']} (the gold pool); "
             "each gold answer is right with the annotator's accuracy and the rule is looked "
             "at after every one, as often as the live applier can. A *false pause* is the "
             "pause of an annotator whose true accuracy is at or above the bar (0.6): the "
             "demo's skilled annotators (accuracy ≥ 0.65), and annotators exactly at the bar "
             f"({n_sim:,} of them) under the demo's schedule and with all {DEMO['gold']} gold "
             "answers looked at (the most looks the demo's pool allows). Careless: accuracy "
             f"{CARELESS_ACCURACY}. With agreement evidence (the demo's suspicion): each "
             "non-gold label is checked too, judged right with the annotator's accuracy, "
             "and gold answers count in that record as well. "
             "Rates ± one standard error.", ""] + sim + [
             "", "Where suspicion comes from, the demo's rule (`suspicion_table`; *late*: "
             f"the schedule reads the records as they were {LAG} labels before, the delay "
             "of the applier and the held inbox that issue 34 found in the real demo, before "
             "a newly suspect annotator's inbox was released; agreement: the same idealised "
             "worker model):", ""] + sus + [
             "", f"**The real demo** (`labelq demo`, 300 tasks, {GOLD_POOL} gold, 12 "
             "annotators of whom "
             f"2 careless at accuracy {CARELESS_ACCURACY}, budget 1,200 labels; quality rule: "
             f"{_rule_words(QUALITY)}) with seeds 0–{args.seeds - 1}, once per schedule, "
             "alternated. Totals over the runs:", "",
             "| gold schedule | careless annotators paused | others paused (false-pause rate "
             "± s.e.) | gold labels (share of all) | posterior accuracy (mean) |",
             "|---|---:|---:|---:|---:|"]
    for schedule, rs in runs.items():
        careless = sum(r["careless"] for r in rs)
        n_careless = sum(r["n_careless"] for r in rs)
        others = sum(r["others"] for r in rs)
        n_others = sum(r["n_others"] for r in rs)
        gold, labels = sum(r["gold"] for r in rs), sum(r["labels"] for r in rs)
        acc = sum(r["accuracy"] for r in rs) / len(rs)
        p, se = rate(np.arange(n_others) < others)
        lines.append(f"| `{schedule}` | {careless} of {n_careless} | {others} of {n_others} "
                     f"({p:.1%} ± {se:.1%}) | {gold:,} ({gold / labels:.1%}) | {acc:.3f} |")
        print(lines[-1], flush=True)
    write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
