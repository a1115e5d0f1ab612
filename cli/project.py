"""``labelq init`` and ``labelq project create|list|show``."""

from __future__ import annotations

import click

from labelq.db import session_scope
from labelq.projects import create_project, get_project, list_projects

from ._common import DB_OPTION, OUTPUT_OPTION, emit, emit_record, engine


@click.command()
@DB_OPTION
def init(database_url):
    """Create the database schema (safe to repeat)."""
    eng = engine(database_url)
    click.echo(f"schema ready at {eng.url.render_as_string(hide_password=True)}")


@click.group()
def project():
    """Create and inspect projects."""


def _project_row(p) -> dict:
    return {"name": p.name, "labels": p.labels, "policy": _spec_text(p.policy),
            "budget": p.budget, "max_labels": p.max_labels, "aggregation": p.aggregation,
            "gold_schedule": p.gold_schedule, "created": p.created.isoformat(timespec="seconds")}


def _spec_text(policy: dict) -> str:
    from labelq.policies import PolicySpec
    return str(PolicySpec.from_json(policy))


@project.command("create")
@click.argument("name")
@click.option("--labels", required=True, help="Comma-separated label set, e.g. 0,1 or cat,dog,bird.")
@click.option("--policy", default="uniform", show_default=True,
              help="Assignment policy spec: name or name:key=value,...")
@click.option("--budget", type=float, default=None, help="Total budget (sum of label costs).")
@click.option("--max-labels", type=int, default=None, help="Maximum labels per task (gold exempt).")
@click.option("--aggregation", default="ds", show_default=True, help="Default aggregation method.")
@DB_OPTION
@OUTPUT_OPTION
def create(name, labels, policy, budget, max_labels, aggregation, database_url, output):
    """Create project NAME."""
    with session_scope(engine(database_url)) as s:
        p = create_project(s, name, labels, policy=policy, budget=budget,
                           max_labels=max_labels, aggregation=aggregation)
        emit_record(_project_row(p), output)


@project.command("list")
@DB_OPTION
@OUTPUT_OPTION
def list_(database_url, output):
    """List projects."""
    with session_scope(engine(database_url)) as s:
        emit([_project_row(p) for p in list_projects(s)], output)


@project.command("show")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def show(name, database_url, output):
    """Show project NAME."""
    with session_scope(engine(database_url)) as s:
        emit_record(_project_row(get_project(s, name)), output)


commands = [init, project]
