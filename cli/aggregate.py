"""``labelq aggregate``: aggregate any ``task,worker,label`` CSV into one label per task."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from labelq.errors import FileFormatError, InputError

from ._common import LazyChoice, output_option

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def _methods() -> list[str]:
    from labelq.aggregation import AGGREGATORS
    return list(AGGREGATORS)


def _read_weights(path: str, workers: list[str]) -> npt.NDArray[np.float64]:
    """``worker,weight`` CSV -> per-worker weights (workers not listed get weight 0)."""
    import numpy as np

    from labelq.datasets import csv_rows
    index = {w: j for j, w in enumerate(workers)}
    weights = np.zeros(len(workers))
    for line, row in csv_rows(Path(path), ("worker", "weight")):
        try:
            value = float(row["weight"])
        except ValueError:
            raise FileFormatError(path, line, "weight", f"not a number: {row['weight']!r}") from None
        if not np.isfinite(value) or value < 0:
            raise FileFormatError(path, line, "weight", f"must be finite and >= 0, got {value}")
        if row["worker"] in index:
            weights[index[row["worker"]]] = value
    return weights


@click.command("aggregate")
@click.argument("labels", type=click.Path())  # unreadable: InputError, exit 3
@click.option("--method", "-m", type=LazyChoice(_methods), default="auto",
              show_default=True,
              help="aggregation algorithm (auto: what the labels support; see --json's "
                   "chosen); kos needs binary labels (2 classes)")
@click.option("--categories", type=click.Path(),
              help="task,type CSV (used by ds-category)")
@click.option("--truth", type=click.Path(),
              help="task,truth CSV: report accuracy against it")
@click.option("--weights", type=click.Path(),
              help="worker,weight CSV for wmv (default: agreement with majority vote)")
@click.option("--gold/--no-gold", default=False,
              help="clamp the --truth answers as gold in EM methods (accuracy is then not "
                   "an out-of-sample number)")
@click.option("--gold-kind", type=click.Choice(["random", "chosen"]), default="random",
              show_default=True,
              help="with --gold: the --truth answers are a random sample of the tasks "
                   "(they choose the method and calibrate the confidences and the accuracy "
                   "estimate), or were chosen (e.g. disputed tasks an expert reviewed: they "
                   "choose the method and are clamped, but calibrate nothing)")
@click.option("--out", type=click.Path(dir_okay=False),
              help="write the per-task CSV to this file (default: stdout)")
@output_option("csv", "json")
def aggregate_cmd(labels: str, method: str, categories: str | None, truth: str | None,
                  weights: str | None, gold: bool, gold_kind: str, out: str | None,
                  output: Literal["csv", "json"]) -> None:
    """Aggregate LABELS.csv (columns task,worker,label; or LABELS.jsonl, one object a line
    with those keys) into one label per task.

    A (task, worker) pair given again is counted once, its first label, as the record
    does (a warning on stderr says how many); a truth file naming a task twice, or sharing
    no task with LABELS, is refused.

    Writes task, label (original value), confidence, p_<class> per class and n_labels as
    CSV to --out or stdout. With -o json (or --json), a JSON summary is printed instead of
    the CSV on stdout (the CSV still goes to --out if given). With --truth, accuracy is
    reported; a task whose top classes tie counts 1/k (a uniform tie break), whichever label
    the CSV shows. (-o once named the output file: it is the format now, as in every
    command; a file name given to it is refused, saying so.)
    """
    import numpy as np

    from labelq.aggregation import (
        AutoAggregator,
        aggregate,
        expected_accuracy,
        krippendorff_alpha,
    )
    from labelq.datasets import read_labels

    as_json = output == "json"
    if weights and method != "wmv":
        raise InputError("--weights is only used with --method wmv", field="weights")
    if gold and not truth:
        raise InputError("--gold needs --truth", field="gold")
    if gold_kind != "random" and not gold:
        raise InputError("--gold-kind is for --gold", field="gold_kind")
    data = read_labels(labels, truth=truth, categories=categories, repeats="first")
    if data.repeats:
        click.echo(f"warning: {data.repeats} repeated (task, worker) pair"
                   f"{'s' if data.repeats > 1 else ''} counted once, the first label of each "
                   f"(as the record keeps one label per worker and task; "
                   f"{data.repeats_differing} with another label than the first); the first: "
                   f"{data.first_repeat}", err=True)
    from labelq.record.projects import BINARY_METHODS
    if method in BINARY_METHODS and data.n_classes != 2:  # before the fit, with what can run
        raise InputError(f"{method} is for binary labels and {labels} has {data.n_classes} "
                         f"classes; choose from "
                         f"{', '.join(m for m in _methods() if m not in BINARY_METHODS)}",
                         field="method")
    w = _read_weights(weights, data.workers) if weights else None
    # chosen answers calibrate nothing (labelq/aggregation/guard.py)
    calibration = np.zeros(data.n_tasks, dtype=bool) if gold_kind == "chosen" else None
    result = aggregate(data.task, data.worker, data.label, method, data.n_tasks,
                       data.n_classes, categories=data.category,
                       gold=data.truth if gold else None, n_workers=data.n_workers, weights=w,
                       calibration=calibration)
    n_labels = np.bincount(data.task, minlength=data.n_tasks)
    if out or not as_json:
        fh = open(out, "w", newline="", encoding="utf-8") if out else sys.stdout
        try:
            writer = csv.writer(fh)
            writer.writerow(["task", "label", "confidence", *(f"p_{c}" for c in data.classes),
                             "n_labels"])
            for i, name in enumerate(data.tasks):
                writer.writerow([name, data.classes[result.labels_[i]],
                                 f"{result.confidence_[i]:.6f}",
                                 *(f"{p:.6f}" for p in result.probas_[i]), int(n_labels[i])])
        finally:
            if out:
                fh.close()
    known = data.truth >= 0
    # a task whose top classes tie is counted as a uniform tie break would score it (1/k),
    # not by the lowest-index label the CSV shows: that would favour the first class
    top = result.probas_ >= result.probas_.max(axis=1, keepdims=True) - 1e-12
    ties = int(np.sum(known & (top.sum(axis=1) > 1)))
    accuracy = expected_accuracy(result.probas_, data.truth) if known.any() else None
    if as_json:
        summary: dict[str, Any] = {
            "method": method, "chosen": getattr(result, "method_", method),
            "reason": getattr(result, "reason_", None), "file": str(labels),
            "n_tasks": data.n_tasks,
            "n_workers": data.n_workers, "n_labels": data.n_labels, "classes": data.classes,
            "class_counts": {c: int(v) for c, v in zip(
                data.classes, np.bincount(result.labels_, minlength=data.n_classes), strict=True)},
            "mean_confidence": float(result.confidence_.mean()) if data.n_tasks else None,
            "krippendorff_alpha": _nan_to_none(krippendorff_alpha(data.task, data.label,
                                                                  data.n_tasks, data.n_classes)),
            "n_truth": int(known.sum()), "accuracy": accuracy, "ties_with_truth": ties,
            "gold_kind": gold_kind if gold else None,
            "repeats_dropped": data.repeats, "out": out,
        }
        if isinstance(result, AutoAggregator):  # its estimate, interval and disagreement
            # (not hasattr(result, "accuracy_"): shrunk's accuracy_ is its workers')
            summary["accuracy_estimate"] = result.accuracy_.as_dict()
            # whether the confidences are calibrated, on how many random gold answers
            summary["calibration"] = result.calibration_
            summary["disagreement"] = result.disagreement_
        click.echo(json.dumps(summary, indent=2))
    elif accuracy is not None:
        tied = f" ({ties} tied, each counted 1/k)" if ties else ""
        click.echo(f"accuracy: {accuracy:.4f} on {int(known.sum())} tasks with truth{tied}",
                   err=not out)


def _nan_to_none(x: float) -> float | None:
    return None if x != x else x


commands = [aggregate_cmd]
