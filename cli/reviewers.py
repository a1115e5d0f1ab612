"""``labelq reviewers add|list|remove``: experts who answer on the review page."""

from __future__ import annotations

import click

from ._common import DB_OPTION, OUTPUT_OPTION, Output, emit, emit_record, engine


@click.group()
def reviewers() -> None:
    """Experts who answer suggested and audit tasks on the review page (/review) with a
    token that can only review."""


@reviewers.command("add")
@click.argument("name")
@click.option("--project", "projects", multiple=True,
              help="A project the reviewer may review (repeat for several; default: all).")
@DB_OPTION
@OUTPUT_OPTION
def add(name: str, projects: tuple[str, ...], database_url: str | None, output: Output) -> None:
    """Add reviewer NAME; prints its token once (only its hash is stored). The token signs
    in at /review and nowhere else: it answers the tasks labelq gold suggest listed and
    labelq gold audit drew, as gold of their kind."""
    from labelq.record.db import session_scope
    from labelq.record.reviewers import add_reviewer

    with session_scope(engine(database_url)) as s:
        row, token = add_reviewer(s, name, list(projects))
        emit_record({"name": row.name, "projects": list(row.projects) or "all",
                     "token": token}, output)
    if output == "table":
        click.echo("(the token is shown only now; hand it to the reviewer, who signs in "
                   "at /review)", err=True)


@reviewers.command("list")
@DB_OPTION
@OUTPUT_OPTION
def list_cmd(database_url: str | None, output: Output) -> None:
    """The reviewers (name, projects, created)."""
    from labelq.record.db import session_scope
    from labelq.record.reviewers import list_reviewers

    with session_scope(engine(database_url)) as s:
        rows = list_reviewers(s)
    emit([{**r, "projects": r["projects"] if isinstance(r["projects"], str)
           else ",".join(r["projects"])} for r in rows] if output != "json" else rows,
         output, columns=["name", "projects", "created"])


@reviewers.command("remove")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def remove(name: str, database_url: str | None, output: Output) -> None:
    """Remove reviewer NAME: its token stops working at once."""
    from labelq.record.db import session_scope
    from labelq.record.reviewers import remove_reviewer

    with session_scope(engine(database_url)) as s:
        remove_reviewer(s, name)
    if output == "table":
        click.echo(f"removed reviewer {name!r}")
    else:
        emit_record({"removed": name}, output)


commands = [reviewers]
