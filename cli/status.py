"""``labelq status NAME``."""

from __future__ import annotations

import click

from ._common import DB_OPTION, OUTPUT_OPTION, Output, emit, emit_record, engine, spec_text

STALE_APPLY_S = 60  # the applier folds labels within a second or so when it runs


@click.command()
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def status(name: str, database_url: str | None, output: Output) -> None:
    """Progress of project NAME: tasks by state, labels, budget, per-worker counts."""
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project
    from labelq.record.stalls import stall_text
    from labelq.reporting import gold_unscheduled, status_report

    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        st = status_report(s, project)  # the dashboard's numbers too
    for w in st["gold_warnings"]:
        click.secho(f"warning: {w['worker']} has seen {w['gold_seen']} of the "
                    f"{w['gold_pool']} gold questions; load more gold (labelq gold load)",
                    fg="yellow", err=True)
    if (st["oldest_unapplied_s"] or 0) > STALE_APPLY_S:
        click.secho(f"warning: {st['unapplied']} labels wait to be applied, the oldest for "
                    f"{st['oldest_unapplied_s']:.0f} s: is a labelq run-worker running?",
                    fg="yellow", err=True)
    stalled = st["stalled"]
    if stalled is not None and not stalled["all"]:
        click.secho(f"warning: {stall_text(stalled)}; " + "; ".join(stalled["reasons"]),
                    fg="yellow", err=True)
    for line in gold_unscheduled(st) + st["suggestion_warnings"]:
        click.secho(f"warning: {line}", fg="yellow", err=True)
    if output == "json":
        import json
        click.echo(json.dumps(st, indent=2, default=str))
        return
    summary = {"project": st["project"], "policy": spec_text(st["policy"]),
               "state": (f"finished: {st['finished']}" if st["finished"] else
                         stall_text(stalled) if stalled is not None and stalled["all"]
                         else "running"),
               **{f"tasks {k}": v for k, v in st["tasks"].items()},
               "labels": st["labels"], "unapplied": st["unapplied"], "budget": st["budget"],
               "spent": st["spent"],
               "left": st["left"]}
    emit_record(summary, output)
    if output == "table" and len(st["categories"]) > 1:
        click.echo("")
        emit([{**c, "category": c["category"] or "-"} for c in st["categories"]], output)
    if output == "table":
        click.echo("")
    emit(st["workers"], output)
    if output == "table" and stalled is not None and stalled["all"]:
        click.echo("")
        click.echo("why: " + "; ".join(stalled["reasons"]))
        click.echo("ways out:")
        for way in stalled["ways_out"]:
            click.echo(f"  - {way}")


commands = [status]
