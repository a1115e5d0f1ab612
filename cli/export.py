"""``labelq export NAME``, ``labelq job ID`` and ``labelq agreement NAME``."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any, Literal

import click

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    REDIS_OPTION,
    LazyChoice,
    Output,
    OutputFormat,
    emit,
    emit_record,
    engine,
    hook_events_at_once,
    redis_client,
)

if TYPE_CHECKING:
    from redis import Redis

# the file formats of an export
ExportFormat = Literal["csv", "jsonl", "parquet"]


def _methods() -> tuple[str, ...]:
    from labelq.exporting import METHODS
    return METHODS


_METHOD_HELP = ("Aggregation method (default: the project's). `auto` picks one the labels "
                "support and says which on stderr; `policy` uses the project policy's own "
                "posterior; `kos` needs binary labels (2 classes): a project with more "
                "refuses it before any work, listing the methods it can run.")


@click.command()
@click.argument("name")
@click.option("--method", type=LazyChoice(_methods), default=None, help=_METHOD_HELP)
@click.option("--format", "-o", "--output", "fmt",
              type=OutputFormat(["csv", "jsonl", "parquet"]), default="csv",
              show_default=True,
              help="Format of the export (-o/--output: the same, as in every command). "
                   "parquet needs pyarrow (pip install 'labelq[parquet]') and --out.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True), default="-",
              help="Output file (default: standard output). Written atomically, with the "
                   "mode a new file gets (0666 less the umask).")
@click.option("--raw", is_flag=True, help="Every label with worker, time and gold flag.")
@click.option("--exclude-paused", is_flag=True,
              help="Leave out the labels of workers who are paused or removed.")
@click.option("--background", is_flag=True,
              help="Run as a job in a Celery worker (needs --out); prints the job id. The "
                   "job goes on if this command exits; follow it with `labelq job ID`.")
@click.option("--wait", is_flag=True, help="With --background: show progress until done.")
@DB_OPTION
@REDIS_OPTION
def export(name: str, method: str | None, fmt: ExportFormat, out: str, raw: bool,
           exclude_paused: bool, background: bool, wait: bool, database_url: str | None,
           redis_url: str | None) -> None:
    """Export project NAME: one row per task with the aggregated label, its confidence,
    where the answer comes from (source: aggregated, expert, gold, model, none) and what it
    rests on (evidence), per-class probabilities, the number of labels and the task's
    payload (CSV, Parquet: payload.<field> columns; JSONL: the object, with each
    annotator's label nested); gold questions are left out; a task with no label yet has an
    empty label. With --raw, every label."""
    from labelq.exportfiles import require_pyarrow
    from labelq.exporting import (
        aggregate_project,
        aggregation_notes,
        export_file,
        load_project_labels,
    )
    from labelq.record.db import session_scope
    from labelq.record.projects import check_method, get_project
    if fmt == "parquet":
        require_pyarrow()  # before any work
    if background:
        _export_background(name, method, fmt, out, raw, exclude_paused, wait, database_url,
                           redis_url)
        return
    # (export.ready, where the project has hooks and the export is a file)
    with hook_events_at_once(), session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        pl = result = None
        if raw:
            what = "labels"
        else:
            chosen = check_method(project, method or project.aggregation)
            pl = load_project_labels(s, project, exclude_paused=exclude_paused)
            result = aggregate_project(s, project, pl, chosen)
            for note in aggregation_notes(pl, chosen, result):
                if note:
                    click.echo(note, err=True)
            what = "tasks"
        n = export_file(s, project, out, fmt, raw=raw, pl=pl, result=result,
                        exclude_paused=exclude_paused)
        if out != "-":  # the file is in place: its event, in this transaction (the
            # project's hooks of export.ready; one SELECT when it has none). Standard
            # output is no file to fetch: no event.
            import os

            from labelq.record.hooks import export_ready
            assert project.id is not None, "a project read from the database has its id"
            export_ready(s, project.id, file=os.path.abspath(out), fmt=fmt, raw=raw,
                         rows=n, method=None if raw else method,
                         chosen=None if raw else getattr(result, "method_", chosen))
    if out != "-":
        click.echo(f"wrote {n} {what} to {out}", err=True)


@click.command("export-dataset")
@click.argument("name")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--truth", type=click.Choice(["gold", "ds"]), default="gold", show_default=True,
              help="gold: the gold answers are the truth (the simulator scores on gold "
                   "tasks); ds: also Dawid-Skene's answer from all the labels, for every task.")
@DB_OPTION
@OUTPUT_OPTION
def export_dataset(name: str, directory: str, truth: Literal["gold", "ds"],
                   database_url: str | None, output: Output) -> None:
    """Write project NAME's labels as a data set folder DIRECTORY (labels.csv, truth.csv,
    task_types.csv) that `labelq simulate --data DIRECTORY` replays: which policy would have
    done best with these annotators?"""
    from labelq.exporting import write_dataset
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        n = write_dataset(s, get_project(s, name), directory, truth=truth)
    click.echo(f"wrote {n['labels']} labels on {n['tasks']} tasks to {directory} "
               f"(truth for {n['truth']} tasks)", err=True)
    if output != "table":
        emit_record({"directory": str(directory), **n}, output)
    if n["truth"] == 0:
        click.echo("warning: no task has a truth (no gold answered): the simulator cannot "
                   "score; try --truth ds", err=True)


def _export_background(name: str, method: str | None, fmt: ExportFormat, out: str, raw: bool,
                       exclude_paused: bool, wait: bool, database_url: str | None,
                       redis_url: str | None) -> None:
    from labelq.errors import InputError
    from labelq.jobs import create_export_job
    from labelq.record.db import database_id, session_scope
    from labelq.record.projects import check_method, get_project

    if out == "-":
        raise InputError("--background needs --out FILE (the job writes the file)")
    eng = engine(database_url)
    with session_scope(eng) as s:
        project = get_project(s, name)  # fail now on an unknown project
        if not raw:  # or on a method its labels cannot run
            check_method(project, method or project.aggregation)
    database = database_id(eng)
    redis = redis_client(redis_url)
    job_id, new = create_export_job(redis, database, name, out=out, method=method, fmt=fmt,
                                    raw=raw, exclude_paused=exclude_paused)
    if new:
        from workers.jobs import export as export_task
        from workers.main import queue_for
        export_task.apply_async(args=[job_id, database],
                                queue=queue_for("labelq.export", database))
    click.echo(job_id)
    click.echo(f"export job {job_id} {'queued' if new else 'already queued or running'}; "
               f"follow it with `labelq job {job_id}`", err=True)
    if wait:
        _follow(redis, database, job_id)


def _follow(redis: Redis, database: str, job_id: str, timeout: float = 3600
            ) -> dict[str, Any]:
    from labelq.errors import LabelqError
    from labelq.jobs import get_job

    deadline = time.monotonic() + timeout
    with click.progressbar(length=1, label="exporting", file=sys.stderr) as bar:
        shown = 0
        while time.monotonic() < deadline:
            job = get_job(redis, database, job_id)
            if job["total"] and bar.length != job["total"]:
                bar.length = job["total"]
            if job["done"] > shown:
                bar.update(job["done"] - shown)
                shown = job["done"]
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.5)
    if job["state"] == "failed":
        raise LabelqError(f"export job {job_id} failed: {job['error']}")
    if job["state"] != "done":
        raise LabelqError(f"export job {job_id} still {job['state']}; is a worker running "
                          "(`labelq run-worker`)?")
    for note in (job.get("aggregation"), job.get("warning")):  # as a foreground export
        if note:
            click.echo(note, err=True)
    click.echo(f"wrote {job['done']} rows to {job['out']}", err=True)
    return job


@click.command()
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="Show progress until the job ends.")
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def job(job_id: str, wait: bool, database_url: str | None, redis_url: str | None,
        output: Output) -> None:
    """Show the state and progress of export job JOB_ID (of the configured database)."""
    from labelq.jobs import get_job, job_view
    from labelq.record.db import database_id

    database = database_id(engine(database_url))
    redis = redis_client(redis_url)
    if wait:
        _follow(redis, database, job_id)
    job = get_job(redis, database, job_id)
    # the API's shape (GET /exports/{id}: labelq.jobs.job_view), and where the file goes
    emit_record({**job_view(job), "out": job.get("out")}, output)


@click.command()
@click.argument("name")
@click.option("--method", type=LazyChoice(_methods), default=None,
              help="Aggregate the per-worker table compares against (default: the "
                   "project's); `kos` needs binary labels.")
@DB_OPTION
@OUTPUT_OPTION
def agreement(name: str, method: str | None, database_url: str | None, output: Output) -> None:
    """Agreement in project NAME: Krippendorff's alpha, Fleiss' kappa and per-worker
    accuracy against gold and against the aggregate."""
    from labelq.exporting import aggregate_project, agreement_report, load_project_labels
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project
    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        pl = load_project_labels(s, project)
        report = agreement_report(pl, aggregate_project(s, project, pl,
                                                        method or project.aggregation))
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    if output == "table":
        emit_record({"labels": report["labels"],
                     "Krippendorff's alpha": report["krippendorff_alpha"],
                     "Fleiss' kappa": report["fleiss_kappa"]}, output)
        click.echo("")
    emit(report["workers"], output)


commands = [export, export_dataset, job, agreement]
