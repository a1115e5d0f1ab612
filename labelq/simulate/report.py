"""Presenting an :class:`~labelq.simulate.experiment.Experiment`: text table, JSON, plot."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigError
from .experiment import Experiment

__all__ = ["format_table", "write_json", "write_plot", "pyplot"]


def format_table(exp: Experiment, markdown: bool = False) -> str:
    """Accuracy (mean ± standard error over runs) per budget (rows) and policy (columns)."""
    data = exp.to_dict()["policies"]
    agg = exp.aggregate
    header = ["labels/task", "labels"]
    for p in data:
        header.append(p["spec"])
        if agg:
            header.append(f"{p['spec']} + {agg}")
    rows = []
    for k, b in enumerate(exp.budgets_per_task):
        first = data[0]["points"][k]
        row = [f"{b:g}", f"{first['labels']:g}"]
        for p in data:
            pt = p["points"][k]
            row.append(f"{pt['accuracy_mean']:.4f} ± {pt['accuracy_se']:.4f}")
            if agg:
                row.append(f"{pt.get('aggregate_accuracy_mean', float('nan')):.4f} ± "
                           f"{pt.get('aggregate_accuracy_se', float('nan')):.4f}")
        rows.append(row)
    notes = _gold_notes(exp, data)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]
                         + (["", *notes] if notes else []))
    widths = [max(len(h), *(len(r[c]) for r in rows)) for c, h in enumerate(header)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*r) for r in rows] + notes)


def _gold_notes(exp: Experiment, data: list[dict[str, Any]]) -> list[str]:
    """With ``--gold``: per policy, the gold answers (and paused workers) of a run at the
    largest budget, means over runs (accuracy above is on the non-gold tasks)."""
    if exp.gold is None:
        return []
    out = [f"gold (mean per run at {exp.budgets_per_task[-1]:g} labels/task; accuracy is on "
           f"the other tasks):"]
    for p in data:
        last = p["points"][-1]
        out.append(f"  {p['spec']}: {last['gold_labels_mean']:.1f} gold answers of "
                   f"{last['spent_mean']:.0f} spent, {last['paused_mean']:.1f} workers paused")
    return out


def write_json(exp: Experiment, path: str | Path) -> None:
    Path(path).write_text(json.dumps(exp.to_dict(), indent=2) + "\n")


def pyplot() -> ModuleType:
    """matplotlib's pyplot on the file-only Agg backend; matplotlib is the ``plot`` extra
    (only plots need it), so its absence is a :class:`ConfigError` saying what to install."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install -e '.[plot]' "
                          "(or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def write_plot(exp: Experiment, path: str | Path, title: str | None = None) -> None:
    """Accuracy against labels per task, one line per policy, error bars = standard error."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in exp.to_dict()["policies"]:
        xs = [pt["budget_per_task"] for pt in p["points"]]
        ax.errorbar(xs, [pt["accuracy_mean"] for pt in p["points"]],
                    yerr=[pt["accuracy_se"] for pt in p["points"]], marker="o", ms=4,
                    capsize=3, label=p["spec"])
        if exp.aggregate and "aggregate_accuracy_mean" in p["points"][0]:
            ax.errorbar(xs, [pt["aggregate_accuracy_mean"] for pt in p["points"]],
                        yerr=[pt["aggregate_accuracy_se"] for pt in p["points"]], marker="s",
                        ms=3, capsize=2, ls="--", label=f"{p['spec']} + {exp.aggregate}")
    runs = exp.to_dict()["policies"][0]["points"][0]["runs"]
    ax.set_xlabel("budget (labels per task)")
    ax.set_ylabel("accuracy")
    ax.set_title(title or f"{exp.source.describe()}  ({runs} runs, ± s.e.)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
