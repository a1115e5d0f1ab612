"""Quick check of ``auto:`` variants (docs/auto.md, "variants tried"): the units of
bench/policies.py (same seeds and runs: ``run_unit``), a few runs, chosen data sets only,
no cache and no table; one line of JSON per (spec, data set) with the mean of the policy's
own posterior and of its best aggregation (the largest mean of own / mv / ds, as the bench
picks it) at each budget.

    nice -n 10 python bench/auto_variants.py "auto;auto:explore=0.2" --only temp,rte --runs 5
    nice -n 10 python bench/auto_variants.py auto --only temp --runs 5 --start 5   # runs 5-9
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.policies import ROOT, Unit, environments, run_unit  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", help="policy specs separated by ';'")
    ap.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--only", default="", help="comma-separated environments (default: all)")
    ap.add_argument("--budgets", default="2,3,5")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--start", type=int, default=0, help="first run index")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    budgets = tuple(float(b) for b in args.budgets.split(","))
    envs = environments(args.datasets, [e for e in args.only.split(",") if e] or None)
    for spec in [s for s in args.specs.split(";") if s]:
        for env, source in envs.items():
            t0 = time.perf_counter()
            recs = [run_unit(Unit(env, source, spec, r, args.seed, budgets))
                    for r in range(args.start, args.start + args.runs)]
            mean = {a: np.array([[p[a] for p in r["points"]] for r in recs]).mean(axis=0)
                    for a in ("own", "mv", "ds")}
            print(json.dumps({"spec": spec, "env": env,
                              "runs": [args.start, args.start + args.runs - 1],
                              "own": mean["own"].round(3).tolist(),
                              "best": np.max(np.stack(list(mean.values())), axis=0)
                              .round(3).tolist(),
                              "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
