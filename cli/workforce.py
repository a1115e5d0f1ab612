"""``labelq workers enroll|list|show|pause|resume|remove|reset-token|default``.

A handle names a person; a person may be enrolled in several projects (one token for all).
The commands about one enrolment (show, pause, resume, remove) take ``--project NAME``,
needed only for a person enrolled in more than one project without a default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import click

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    Output,
    emit,
    emit_record,
    engine,
    hook_events_at_once,
)

if TYPE_CHECKING:
    from labelq.record.goldstats import ProjectGold

# what pause, resume and remove set an annotator to (labelq.record.models.WORKER_STATUSES)
WorkerStatus = Literal["active", "paused", "removed"]


@click.group()
def workers() -> None:
    """Enroll and manage annotators."""


@workers.command("enroll")
@click.argument("name")
@click.argument("handle")
@click.option("--cost", type=float, default=1.0, show_default=True,
              help="Cost per label, in the units of the project budget.")
@click.option("--capacity", type=int, default=None, help="Most labels this worker can give.")
@click.option("--categories", default="", help="Comma-separated task categories (empty: any).")
@click.option("--default", "preferred", is_flag=True,
              help="Make NAME this person's default project (where a client that names no "
                   "project works).")
@DB_OPTION
@OUTPUT_OPTION
def enroll(name: str, handle: str, cost: float, capacity: int | None, categories: str,
           preferred: bool, database_url: str | None, output: Output) -> None:
    """Enroll annotator HANDLE in project NAME; prints the worker's token once. A HANDLE
    already enrolled in another project is the same person: NAME is added to their
    projects and their token stays the one they have (none is printed)."""
    from labelq.record.db import session_scope
    from labelq.record.projects import enroll_worker, get_project, unknown_categories
    with session_scope(engine(database_url)) as s:
        p = get_project(s, name)
        w, token = enroll_worker(s, p, handle, cost=cost, capacity=capacity,
                                 categories=categories.split(",") if categories else [],
                                 preferred=preferred)
        unknown = unknown_categories(s, p, w.categories)
        emit_record({"handle": w.handle, "project": name, "cost": w.cost,
                     "capacity": w.capacity, "categories": w.categories, "token": token,
                     "default": bool(w.preferred)}, output)
    if output == "table":
        click.echo("(the token is shown only now; hand it to the annotator)" if token else
                   f"({handle} already has a token, from another project: the same token "
                   f"now works in {name!r} too)", err=True)
    if unknown:
        click.echo(f"warning: no task in {name!r} has category {', '.join(map(repr, unknown))} "
                   f"yet; {handle} gets work only from tasks of their categories", err=True)


def _rows(database_url: str | None, name: str | None, handle: str | None = None
          ) -> list[dict[str, Any]]:
    # (with ``handle``, ``name`` names the enrolment shown: None, the only one or default)
    """``workers list``'s rows: of project ``name``'s workers (None: all), or of ``handle``
    (with ``pauses``, every pause's trail). ``pause`` is the last pause's trail while the
    annotator is paused."""
    from sqlalchemy import func
    from sqlmodel import col, select

    from labelq.dashboard import gold_summary
    from labelq.record.db import session_scope
    from labelq.record.goldstats import project_gold_scores
    from labelq.record.models import Label, Project
    from labelq.record.pauses import last_pauses, pause_trail, worker_pauses
    from labelq.record.projects import get_project, get_worker, list_workers
    with session_scope(engine(database_url)) as s:
        proj = get_project(s, name) if name else None
        chosen = [get_worker(s, handle, proj)] if handle is not None \
            else list_workers(s, proj)
        # (keyed as Worker.id is typed: None only before a worker is flushed)
        counts: dict[int | None, int] = {
            worker: n for worker, n in s.exec(select(col(Label.worker_id), func.count())
                                              .group_by(col(Label.worker_id))).all()}
        projects = {p.id: p for p in s.exec(select(Project)).all()}
        gold: dict[int, ProjectGold] = {}
        rows: list[dict[str, Any]] = []
        pauses = last_pauses(s, [w.id for w in chosen if w.id is not None])
        for w in chosen:
            if w.project_id not in gold:
                gold[w.project_id] = project_gold_scores(s, projects[w.project_id],
                                                         with_chosen=True)
            event = pauses.get(w.id) if w.id is not None else None
            row: dict[str, Any] = {
                "handle": w.handle, "project": projects[w.project_id].name,
                "status": w.status, "cost": w.cost, "capacity": w.capacity,
                "categories": w.categories, "default": bool(w.preferred),
                "labels": counts.get(w.id, 0),
                **gold_summary(gold[w.project_id], w.seq),
                "pause": pause_trail(event) if event is not None else None}
            if handle is not None:
                row["pauses"] = [pause_trail(e) for e in worker_pauses(s, w)]
            rows.append(row)
    return rows


PROJECT_OPTION = click.option(
    "--project", "name", default=None,
    help="The project of the enrolment, for a person enrolled in several (else their only "
         "one, or their default).")


@workers.command("show")
@click.argument("handle")
@PROJECT_OPTION
@DB_OPTION
@OUTPUT_OPTION
def show(handle: str, name: str | None, database_url: str | None, output: Output) -> None:
    """Show annotator HANDLE as labelq workers list does: status, labels, gold accuracy on
    random gold (loaded, audit) with its 95% interval, apart their agreement with the
    expert on disputed tasks (chosen gold: suggested, reviewed), and, while paused, the
    pause's trail (``pause``: when, by which rule, on what evidence); ``pauses``: every
    pause."""
    record = _rows(database_url, name, handle)[0]
    if output == "table":
        trails = record["pauses"]
        record["pause"] = record["pause"]["text"] if record["pause"] else None
        record["pauses"] = "; ".join(f"{t['at']} {t['text']}" for t in trails)
    emit_record(record, output)


@workers.command("list")
@click.option("--project", "name", default=None, help="Only this project's workers.")
@DB_OPTION
@OUTPUT_OPTION
def list_(name: str | None, database_url: str | None, output: Output) -> None:
    """List annotators with their label counts and gold accuracy: gold_accuracy is raw
    (right / answered), gold_smoothed the Beta posterior mean the quality rule reads, with
    its 95% interval; gold_by_category the same per category — all on random gold only
    (loaded, audit). disputed_agreement (with its 95% interval) is agreement with the
    expert on disputed tasks (gold suggested or reviewed): chosen for being hard, it is
    no accuracy and pauses no one. On a project showing a model's suggestions, gold scores
    only the answers given without one shown; gold_with_suggestion(_correct) counts the
    others, apart (docs/models.md). pause, for a paused annotator, the pause's trail (its
    text in the table)."""
    rows = _rows(database_url, name)
    if output == "table":
        for row in rows:
            row["pause"] = row["pause"]["text"] if row["pause"] else None
    emit(rows, output)


def _status_command(status: WorkerStatus, verb: str) -> click.Command:
    @click.command(verb)
    @click.argument("handle")
    @PROJECT_OPTION
    @DB_OPTION
    @OUTPUT_OPTION
    def cmd(handle: str, name: str | None, database_url: str | None, output: Output) -> None:
        from labelq.record.db import session_scope
        from labelq.record.models import Project
        from labelq.record.projects import set_worker_status

        # (annotator.paused / resumed, where the project has hooks)
        with hook_events_at_once(), session_scope(engine(database_url)) as s:
            w = set_worker_status(s, handle, status, name)
            project = s.get(Project, w.project_id)
            assert project is not None  # (foreign key)
            name = project.name
        if output == "table":
            click.echo(f"{handle}: {status} (in {name!r})")
        else:
            emit_record({"handle": handle, "project": name, "status": status}, output)

    cmd.__doc__ = f"Set annotator HANDLE {status} (in one project: --project)."
    cmd.help = cmd.__doc__
    return cmd


workers.add_command(_status_command("paused", "pause"))
workers.add_command(_status_command("active", "resume"))
remove = _status_command("removed", "remove")
remove.help = ("Remove annotator HANDLE from a project (--project, for a person in several): "
               "their token no longer signs in there and they get no more work there; their "
               "labels stay (export --exclude-paused leaves them out).")
workers.add_command(remove)


@workers.command("reset-token")
@click.argument("handle")
@DB_OPTION
@OUTPUT_OPTION
def reset_token_cmd(handle: str, database_url: str | None, output: Output) -> None:
    """Give annotator HANDLE a new token, for one that was lost (tokens are stored hashed
    and cannot be shown again), in every project they are enrolled in; the old token stops
    working within a second."""
    from labelq.record.db import session_scope
    from labelq.record.projects import reset_token
    with session_scope(engine(database_url)) as s:
        w, token = reset_token(s, handle)
        emit_record({"handle": w.handle, "token": token}, output)
    if output == "table":
        click.echo("(the token is shown only now; hand it to the annotator)", err=True)


@workers.command("default")
@click.argument("handle")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def default_cmd(handle: str, name: str, database_url: str | None, output: Output) -> None:
    """Make project NAME the default of annotator HANDLE (enrolled in several projects):
    where their labeling page, and any client that names no project, works."""
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project, set_preferred
    with session_scope(engine(database_url)) as s:
        set_preferred(s, handle, get_project(s, name))
    if output == "table":
        click.echo(f"{handle}: default project {name!r}")
    else:
        emit_record({"handle": handle, "default": name}, output)


commands = [workers]
