"""``labelq simulate``: run policies on a synthetic task set or a replayed data set."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, TextIO

import click

from labelq.errors import InputError

from ._common import output_option

__all__ = ["commands", "parse_budgets"]


def parse_budgets(text: str) -> list[float]:
    """``1,2,4,8`` or ``1..10`` (integer steps) or a mix: ``0.5,1..4``."""
    out: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if ".." in part:
                lo, hi = (int(x) for x in part.split(".."))
                if hi < lo:
                    raise ValueError
                out += [float(x) for x in range(lo, hi + 1)]
            else:
                out.append(float(part))
        except ValueError:
            raise InputError(f"--budget-per-task: expected numbers like 1,2,4 or a range "
                             f"like 1..10, got {part!r}") from None
    if not out or min(out) < 0:
        raise InputError(f"--budget-per-task: need non-negative budgets, got {text!r}")
    return sorted(set(out))


@click.command("simulate")
@click.option("--data", "data_dir", type=click.Path(),  # checked below: exit 3, not 2
              help="Replay a data set folder (labels.csv, truth.csv[, task_types.csv]).")
@click.option("--predictions", "predictions", type=click.Path(), default=None,
              metavar="FILE",
              help="A model's predictions for the --data set (task,p_<class>,...): every "
                   "policy also runs with them available from the start (row 'SPEC +model'; "
                   "the budget counts human labels only); see docs/models.md.")
@click.option("--synthetic", "synthetic_spec", metavar="SPEC",
              help='Synthetic task set, e.g. "tasks=500,categories=4,workers=40,'
                   'model=spammer-hammer,classes=2" (see docs/simulator.md).')
@click.option("--policy", "policies", multiple=True, required=True, metavar="SPEC",
              help='Policy spec, e.g. "optkg" or "cvar:alpha=0.2"; repeat for several.')
@click.option("--budget-per-task", "budgets", default="1..10", show_default=True,
              help="Budgets in labels (cost units) per task: 1,2,4,8 or 1..10.")
@click.option("--runs", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes.")
@click.option("--cap", "max_labels", type=click.IntRange(min=1), default=None,
              help="At most this many labels per task (gold tasks exempt).")
@click.option("--aggregate", default=None, metavar="METHOD",
              help="Also score a labelq.aggregation method (e.g. ds) on the collected labels.")
@click.option("--mode", type=click.Choice(["push", "pull", "task"]), default=None,
              help="Override every policy's own mode (push: the policy picks the pair; pull: "
                   "a random worker arrives and the policy picks the task; task: the policy "
                   "picks the task, a random worker among those eligible for it answers).")
@click.option("--shuffle", is_flag=True,
              help="Replay the data set's tasks and workers in a new random order each run "
                   "(the same order for every policy of a run), so no policy gains from the "
                   "file listing its best workers first.")
@click.option("--gold", "gold", metavar="FRACTION", default=None,
              help="Serve a seeded sample of the tasks with a truth as gold questions (a "
                   "share in (0,1), or an integer count >= 1), the same for every policy of "
                   "a run; accuracy is scored on the other tasks (see docs/simulator.md).")
@click.option("--gold-schedule", "gold_schedule", metavar="SPEC", default=None,
              help="When a worker gets a gold question, as `project create --gold-schedule` "
                   "(e.g. fixed:rate=0.1, onboarding:n=5, epochs:alpha=0.1, per-category:s=3; "
                   "none: held out, never served). Default fixed:rate=0.1; needs --gold.")
@click.option("--quality", metavar="SPEC", default=None,
              help="Pause workers on their gold answers, as `project create --quality` "
                   "(e.g. threshold=0.7,min_gold=10); needs --gold.")
@click.option("--out", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the results as JSON to this file.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Also draw accuracy against budget into this image file.")
@output_option("table", "markdown", "json", json_flag=False)
@click.option("--json", "json_opt", is_flag=False, flag_value="-", default=None,
              metavar="[FILE]", help="Print the results as JSON (the same as -o json); "
              "--json FILE, its earlier meaning, still writes them to FILE as --out does.")
@click.option("--markdown", is_flag=True, help="Print the table as Markdown (-o markdown).")
def simulate(data_dir: str | None, predictions: str | None, synthetic_spec: str | None,
             policies: tuple[str, ...],
             budgets: str, runs: int, seed: int, jobs: int, max_labels: int | None,
             aggregate: str | None, mode: Literal["push", "pull", "task"] | None,
             shuffle: bool, gold: str | None, gold_schedule: str | None, quality: str | None,
             json_out: str | None, plot_out: str | None,
             output: Literal["table", "markdown", "json"], json_opt: str | None,
             markdown: bool) -> None:
    """Accuracy against budget for each policy (mean ± standard error over runs).

    Progress goes to stderr: a bar on a terminal, else a log line every 10% of the runs."""
    from labelq.simulate.experiment import EnvSource, run_experiment
    from labelq.simulate.gold import DEFAULT_SCHEDULE
    from labelq.simulate.report import format_table, pyplot, write_json, write_plot
    from labelq.simulate.synthetic import SyntheticSpec

    if markdown:
        output = "markdown"
    if json_opt == "-":
        output = "json"
    elif json_opt is not None:
        if json_out and json_out != json_opt:
            raise click.UsageError("give the JSON file once: --out FILE (--json FILE is its "
                                   "earlier spelling)")
        json_out = json_opt
    if (data_dir is None) == (synthetic_spec is None):
        raise click.UsageError("give exactly one of --data DIR or --synthetic SPEC")
    if plot_out:
        pyplot()  # before the runs: a missing matplotlib is said at once, not after them
    if synthetic_spec is not None:
        if predictions is not None:
            raise click.UsageError("--predictions needs --data (predictions name a data "
                                   "set's tasks)")
        SyntheticSpec.parse(synthetic_spec)
        source = EnvSource("synthetic", synthetic_spec)
    else:
        assert data_dir is not None  # (one of the two, checked above)
        if not (Path(data_dir) / "labels.csv").is_file():
            raise InputError(f"{data_dir}: no labels.csv (expected a data set folder)",
                             path=str(data_dir))
        if not (Path(data_dir) / "truth.csv").is_file():
            raise InputError(f"{data_dir}: no truth.csv: simulate scores what each policy "
                             "collects against the truth (to aggregate labels without it: "
                             "labelq aggregate)", path=str(data_dir))
        if predictions is not None and not Path(predictions).is_file():
            raise InputError(f"--predictions {predictions}: no such file", path=predictions)
        source = EnvSource("data", str(data_dir), predictions)
    per_task = parse_budgets(budgets)
    if gold is not None:  # option errors before any run (and before a progress bar)
        from labelq.simulate.gold import GoldRules, parse_gold_amount
        parse_gold_amount(gold)
        GoldRules.parse(gold_schedule, quality)
    gold_opts = {"gold": gold, "gold_schedule": gold_schedule, "quality": quality}
    err = sys.stderr
    if err.isatty():
        with click.progressbar(length=1, label="simulating", file=err) as bar:
            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)
            exp = run_experiment(source, policies, per_task, runs=runs, seed=seed, jobs=jobs,
                                 aggregate=aggregate, max_labels_per_task=max_labels,
                                 mode=mode, progress=progress, shuffle=shuffle,
                                 **gold_opts)
    else:  # a log or a pipe: a line now and then, not a bar redrawn in place
        exp = run_experiment(source, policies, per_task, runs=runs, seed=seed, jobs=jobs,
                             aggregate=aggregate, max_labels_per_task=max_labels,
                             mode=mode, progress=_LogProgress(err), shuffle=shuffle,
                             **gold_opts)
    head = (f"{source.describe()}: {exp.n_tasks} tasks, {runs} runs, seed {seed}"
            + (f", mode {mode}" if mode else "") + (", shuffled" if shuffle else "")
            + (f", gold {gold} served by {gold_schedule or DEFAULT_SCHEDULE}"
               + (f", quality {quality}" if quality else "") if gold is not None else "")
            + (f"; the model alone: accuracy {exp.model_accuracy:.4f}"
               if exp.model_accuracy is not None else ""))
    if output == "json":
        import json
        click.echo(head, err=True)
        click.echo(json.dumps(exp.to_dict(), indent=2))
    else:
        click.echo(head)
        click.echo(format_table(exp, markdown=output == "markdown"))
    if json_out:
        write_json(exp, json_out)
        click.echo(f"wrote {json_out}", err=True)
    if plot_out:
        write_plot(exp, plot_out)
        click.echo(f"wrote {plot_out}", err=True)
    sys.stdout.flush()


class _LogProgress:
    """Progress as log lines on ``stream``: at the start, every 10% and at the end, with
    the time taken so far."""

    def __init__(self, stream: TextIO) -> None:
        import time
        self.stream, self.start, self.shown = stream, time.monotonic(), -1

    def __call__(self, done: int, total: int) -> None:
        import time
        step = (10 * done) // max(total, 1)
        if step == self.shown:
            return
        self.shown = step
        took = time.monotonic() - self.start
        print(f"simulating: {done}/{total} runs ({100 * done / max(total, 1):.0f}%), "
              f"{took:.0f} s", file=self.stream, flush=True)


commands = [simulate]
