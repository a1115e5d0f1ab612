"""``labelq export NAME`` and ``labelq agreement NAME``."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import tempfile
from typing import IO, Iterator

import click

from labelq.db import session_scope
from labelq.exporting import (METHODS, agreement_report, aggregate_project, aggregated_rows,
                              load_project_labels)
from labelq.projects import get_project, list_workers
from labelq.reporting import iter_raw_labels, write_raw_labels

from ._common import DB_OPTION, OUTPUT_OPTION, emit, engine


@contextlib.contextmanager
def atomic_output(out: str) -> Iterator[IO[str]]:
    """Standard output for ``-``; otherwise a temporary file renamed over ``out`` on
    success, so a failed export never leaves a half-written file."""
    if out == "-":
        yield sys.stdout
        return
    directory = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".labelq-export-")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def write_rows(rows, out: IO[str], fmt: str) -> int:
    n = 0
    writer = None
    for row in rows:
        if fmt == "csv":
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
        else:
            out.write(json.dumps(row) + "\n")
        n += 1
    return n


@click.command()
@click.argument("name")
@click.option("--method", type=click.Choice(METHODS), default=None,
              help="Aggregation method (default: the project's). `policy` uses the "
                   "project policy's own posterior.")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv",
              show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, writable=True), default="-",
              help="Output file (default: standard output). Written atomically.")
@click.option("--raw", is_flag=True, help="Every label with worker, time and gold flag.")
@click.option("--exclude-paused", is_flag=True,
              help="Leave out the labels of workers who are paused or removed.")
@DB_OPTION
def export(name, method, fmt, out, raw, exclude_paused, database_url):
    """Export project NAME: one row per task with the aggregated label, its confidence,
    per-class probabilities and the number of labels (gold questions are left out);
    or, with --raw, every label."""
    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        if raw:
            rows = iter_raw_labels(s, project)
            if exclude_paused:
                active = {w.handle for w in list_workers(s, project) if w.status == "active"}
                rows = (r for r in rows if r["worker"] in active)
            with atomic_output(out) as fh:
                n = write_raw_labels(rows, fh, fmt)
            what = "labels"
        else:
            pl = load_project_labels(s, project, exclude_paused=exclude_paused)
            result = aggregate_project(s, project, pl, method or project.aggregation)
            with atomic_output(out) as fh:
                n = write_rows(aggregated_rows(pl, result), fh, fmt)
            what = "tasks"
    if out != "-":
        click.echo(f"wrote {n} {what} to {out}", err=True)


@click.command()
@click.argument("name")
@click.option("--method", type=click.Choice(METHODS), default=None,
              help="Aggregate the per-worker table compares against (default: the project's).")
@DB_OPTION
@OUTPUT_OPTION
def agreement(name, method, database_url, output):
    """Agreement in project NAME: Krippendorff's alpha, Fleiss' kappa and per-worker
    accuracy against gold and against the aggregate."""
    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        pl = load_project_labels(s, project)
        report = agreement_report(pl, aggregate_project(s, project, pl,
                                                        method or project.aggregation))
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    if output == "table":
        click.echo(f"labels               {report['labels']}")
        click.echo(f"Krippendorff's alpha {report['krippendorff_alpha']}")
        click.echo(f"Fleiss' kappa        {report['fleiss_kappa']}\n")
    emit(report["workers"], output)


commands = [export, agreement]
