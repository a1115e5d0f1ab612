"""Does the demo's accuracy estimate hold? ``labelq demo --seed S`` for each seed: the
export's true accuracy (its labelled tasks against the demo's truth) and the estimate's
95 % interval, as the demo prints them; writes the section ``demo-estimate`` of
docs/benchmarks.md.

    python -m bench.demo_estimate --seeds 10

The demo runs its annotators in threads against a live Celery worker, so a seed fixes the
workforce and the tasks, not every outcome.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._report import command_line, machine, write_section  # noqa: E402

_LINE = re.compile(r"The export \((?P<method>[^)]*)\): (?P<acc>[0-9.]+) of its (?P<n>\d+) "
                   r"labelled tasks right; estimated accuracy (?P<est>[0-9.]+), 95% interval "
                   r"(?P<lo>[0-9.]+)-(?P<hi>[0-9.]+) \((?P<basis>[^)]*)\): (?P<holds>holds|misses)")


def one(seed: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "cli.main", "demo", "--seed", str(seed)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=True).stdout
    m = _LINE.search(out)
    if not m:
        raise SystemExit(f"unexpected demo output:\n{out}")
    return {"seed": seed, "method": m["method"], "acc": float(m["acc"]), "n": int(m["n"]),
            "est": float(m["est"]), "lo": float(m["lo"]), "hi": float(m["hi"]),
            "basis": m["basis"], "holds": m["holds"] == "holds"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="demo seeds 0..N-1")
    args = ap.parse_args()
    rows = []
    for seed in range(args.seeds):
        rows.append(one(seed))
        print(rows[-1], flush=True)
    held = sum(r["holds"] for r in rows)
    lines = ["## The demo's accuracy estimate against the truth (`bench/demo_estimate.py`)", "",
             f"Command: `{command_line()}`", "", f"Machine: {machine()}.", "",
             "`labelq demo --seed S`: the export's accuracy on its labelled tasks, and the "
             "95 % interval of its estimate (exact, finite-population Clopper-Pearson on the "
             "random gold questions the export answers right with their gold held out, "
             "`labelq/aggregation/guard.py`; gold labels thinned to the tasks' label counts "
             "and annotator mix, `AutoAggregator._thin_gold`).", "",
             "| seed | chosen | true accuracy | estimate | 95 % interval | holds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['method']} | {r['acc']:.3f} | {r['est']:.3f} | "
                     f"{r['lo']:.3f}–{r['hi']:.3f} | {'yes' if r['holds'] else 'no'} |")
    width = sum(r["hi"] - r["lo"] for r in rows) / len(rows)
    lines += ["", f"The interval holds the true accuracy on {held} of {len(rows)} seeds "
              f"(mean width {width:.3f}).", ""]
    write_section("demo-estimate", "\n".join(lines))


if __name__ == "__main__":
    main()
