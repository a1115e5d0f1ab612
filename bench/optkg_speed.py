"""Seconds per run of ``optkg-workers`` and ``optkg-multi`` (or ``--policies``), this checkout
against another.

One run is what ``bench/policies.py`` does for a unit without its mv/ds aggregations: the
policy replays a shared data set (seed 0, run 0) to 2, 3 and 5 labels per task. Each run is a
fresh process (so every run pays the same start-up and no memo carries over), timed inside
by CPU seconds (``time.process_time``, robust to a shared machine) and wall seconds; the
runs of the two checkouts alternate. A run also returns a digest of its (task, worker)
choices and its accuracies, and the table says whether both checkouts' agree.

    git archive 43e4f5b | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python bench/optkg_speed.py --before /tmp/before --datasets athlete,rte --repeats 3

writes the section ``optkg-speed`` of docs/benchmarks.md (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = (2.0, 3.0, 5.0)
NOTE = ("Binary data sets (athlete, rte): the R+ cache now computes only the stale *eligible* "
        "pairs and the argmax reads only the eligible pairs. Multi-class (dog, web): a label's "
        "cost is the quadratures of the labelled task's reward grid (1 + 6C rows of "
        "`_dirichlet.prob_largest`, ~70,000 `gammainc` per label at C = 5), the same "
        "arithmetic before and after; only exact repeats of a task state are memoised, so "
        "the gain there is small.")


def child(root: str, data: str, spec: str) -> None:
    """Run one replay with the labelq of ``root``; print a JSON line."""
    sys.path.insert(0, root)
    import time

    import numpy as np

    from labelq.policies import build
    from labelq.simulate.experiment import EnvSource, run_rngs
    from labelq.simulate.runner import record_choices, run_policy

    env_rng, rng = run_rngs(0, 0, spec)
    env = EnvSource("data", data).build(env_rng)
    policy = build(spec)
    choices = record_choices(policy)
    cpu, wall = time.process_time(), time.perf_counter()
    points = run_policy(policy, env, [b * env.n_tasks for b in BUDGETS], rng)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    digest = hashlib.sha256(np.asarray(choices, dtype=np.int64).tobytes()).hexdigest()[:16]
    print(json.dumps({"cpu": cpu, "wall": wall, "choices": digest,
                      "accuracy": [p.accuracy for p in points],
                      "labelq": str(Path(sys.modules["labelq"].__file__ or "").parent)}))


def run(root: Path, data: Path, spec: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(root), str(data), spec],
                         check=True, capture_output=True, text=True, cwd="/")
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(rec["labelq"]).resolve() != (root / "labelq").resolve():
        raise SystemExit(f"ran {rec['labelq']}, not {root}/labelq")
    return rec


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="checkout of the old code")
    ap.add_argument("--datasets", default="athlete,rte")
    ap.add_argument("--policies", default="optkg-workers,optkg-multi")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--once", default="", help="data sets to run once per side (the slow ones)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default="optkg-speed",
                    help="the section of docs/benchmarks.md to write")
    ap.add_argument("--before-name", default="43e4f5b (before the speed-ups)",
                    help="what --before is a checkout of, for the text")
    ap.add_argument("--note", default=NOTE, help="the paragraph under the table")
    args = ap.parse_args()
    rows = []
    for name in args.datasets.split(","):
        for spec in args.policies.split(","):
            recs: dict[str, list[dict]] = {"before": [], "after": []}
            repeats = 1 if name in args.once.split(",") else args.repeats
            for _ in range(repeats):
                for side, root in (("before", args.before.resolve()), ("after", ROOT)):
                    recs[side].append(run(root, args.shared / name, spec))
            same = len({(r["choices"], tuple(r["accuracy"])) for rs in recs.values()
                        for r in rs}) == 1
            med = {side: (statistics.median(r["cpu"] for r in rs),
                          statistics.median(r["wall"] for r in rs)) for side, rs in recs.items()}
            acc = ", ".join(f"{a:.4f}" for a in recs["after"][0]["accuracy"])
            row = (f"| {name} | {spec} | {repeats} | {med['before'][0]:.1f} | "
                   f"{med['after'][0]:.1f} | "
                   f"{med['before'][0] / med['after'][0]:.1f}x | {med['before'][1]:.1f} | "
                   f"{med['after'][1]:.1f} | {'yes' if same else '**NO**'} ({acc}) |")
            print(row, flush=True)
            rows.append(row)
    sys.path.insert(0, str(ROOT))
    from bench._report import command_line, machine, write_section
    md = "\n".join([
        f"## {' / '.join(args.policies.split(','))} speed (`bench/optkg_speed.py`)",
        "",
        f"`{command_line()}` with `--before` a checkout of {args.before_name}; "
        f"{machine()}, shared with other jobs. One run: seed 0, run 0, 2/3/5 labels per task "
        f"(bench/policies.py's unit without its mv/ds aggregations), each in its own process; "
        f"median of the runs per side (*runs*), the sides alternating. *Same*: every run of "
        f"both checkouts made the same (task, worker) choices (digest of the sequence) and "
        f"the same accuracies (own, at 2/3/5). (The `seconds` that bench/policies.py caches "
        f"per unit are wall seconds, including the mv/ds aggregations and any time its "
        f"process was stopped or starved by other jobs.)",
        "",
        "| data set | policy | runs | CPU s before | CPU s after | speed-up | wall s before "
        "| wall s after | same (accuracy at 2/3/5) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        args.note,
    ])
    if args.no_write:
        print(md)
    else:
        write_section(args.section, md)


if __name__ == "__main__":
    main()
