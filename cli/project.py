"""``labelq init`` and ``labelq project create|list|show``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypedDict

import click

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    REDIS_OPTION,
    Output,
    emit,
    emit_record,
    engine,
    init_engine,
    project_session,
    redis_client,
    spec_text,
    stored_id,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from labelq.record.models import Project

GOLD_OPTION = click.option(
    "--gold-schedule", default=None,
    help="When annotators get gold questions: none, fixed:rate=0.1, "
         "onboarding:n=5,rate=0.2,half_life=200,floor=0.02, epochs:alpha=0.1,gamma=2, "
         "per-category:s=3; fixed and onboarding also take suspect=0.5,suspect_below=0.7 "
         "(gold at rate >= suspect while the annotator's gold record is below "
         "suspect_below; docs/gold.md).")
QUALITY_OPTION = click.option(
    "--quality", default=None,
    help="Pause rule on gold accuracy: threshold=0.7,min_gold=10[,confidence=0.95,"
         "per_category=true,rule=posterior|sequential] (sequential: a worker at or above "
         "the threshold is ever paused with probability at most 1 - confidence).")
INSTRUCTIONS_OPTION = click.option(
    "--instructions", type=click.Path(dir_okay=False), default=None, metavar="FILE.md",
    help="A file of instructions for annotators (Markdown, shown as text on the labeling "
         "page, collapsible); an empty file removes them.")
SUGGESTIONS_OPTION = click.option(
    "--show-suggestions/--no-show-suggestions", default=None,
    help="Show annotators the model's answer beside a task it predicted (off by default: a "
         "shown answer pulls labels towards it; labels given with one shown are marked and "
         "not taken as independent evidence where they agree with it, docs/models.md).")
LABEL_NAMES_OPTION = click.option(
    "--label-names", default=None, metavar='LABEL="Name",...',
    help='Display names of labels on the labeling page, e.g. neg="Negative",pos="Positive" '
         '(buttons and keys 1..9 follow the label set\'s order); "" removes them.')


@click.command()
@DB_OPTION
@click.option("--here", is_flag=True,
              help="Make ./labelq.db and a ./labelq.toml naming it: every labelq command run "
                   "in this folder or below then uses it.")
@click.option("--new-identity", is_flag=True,
              help="Give the database a new identity (a copy of another database: its hot "
                   "state is rebuilt from its SQL under the new identity's Redis keys; the "
                   "original's are left alone).")
@click.option("--claim", is_flag=True,
              help="Make this database the home of its identity on Redis (a database moved "
                   "from where it was; its hot state is kept).")
@REDIS_OPTION
@OUTPUT_OPTION
def init(database_url: str | None, here: bool, new_identity: bool, claim: bool,
         redis_url: str | None, output: Output) -> None:
    """Create the database and its schema — the only command that does (safe to repeat;
    on a database of an earlier labelq, adds the tables and columns added since and its
    identity).

    Where: --database-url, else LABELQ_DATABASE_URL, else the nearest labelq.toml's
    database_url (this folder or above), else the per-user $XDG_DATA_HOME/labelq/labelq.db;
    with --here, ./labelq.db, named by a new ./labelq.toml.

    A copy of a database (same identity, another place) is refused by every command that
    touches the hot state until --new-identity gives it its own; a database moved from
    where it was until --claim (docs/architecture.md, "A database that knows it is a
    copy")."""
    from pathlib import Path

    from labelq.record.location import CONFIG_NAME, default_database_url, write_config
    already = False  # (--here a second time: said so)
    if here:
        if database_url or os.environ.get("LABELQ_DATABASE_URL"):
            raise click.UsageError("--here makes ./labelq.db: give no --database-url "
                                   "(and unset LABELQ_DATABASE_URL) with it")
        config, file = Path.cwd() / CONFIG_NAME, Path.cwd() / "labelq.db"
        if config.exists():
            # safe to repeat: the config --here wrote (it names ./labelq.db) is kept, and
            # the database it names set up as a plain init would; another one is not ours
            named = default_database_url(cwd=Path.cwd())
            if named != f"sqlite:///{file.resolve()}":
                raise click.UsageError(
                    f"./{CONFIG_NAME} exists already and names another database "
                    f"({named}): run `labelq init` without --here to set up that one")
            already = file.exists() and _initialised(named)
        else:
            write_config(Path.cwd(), "sqlite:///labelq.db")
    if new_identity and claim:
        raise click.UsageError("--new-identity and --claim exclude each other: a copy gets "
                               "a new identity, a moved database claims its own")
    eng, location, uid = init_engine(database_url)
    rebuilt: list[str] = []
    if new_identity or claim:
        rebuilt = _rehome(eng, redis_url, new_identity)
        from labelq.record.db import database_id
        uid = database_id(eng)
    if output == "table":
        if already:
            click.echo(f"already initialised: ./{CONFIG_NAME} names ./labelq.db (schema "
                       "checked, nothing else changed)")
        click.echo(f"schema ready at {location.describe()}; database id {uid}")
        if new_identity:
            click.echo(f"new identity {uid}: hot state rebuilt for "
                       f"{len(rebuilt)} project{'' if len(rebuilt) == 1 else 's'}")
        elif claim:
            click.echo(f"this database is now the home of identity {uid} on Redis")
    else:
        emit_record({"database": location.shown, "source": location.source, "id": uid,
                     "schema": "ready", **({"already_initialised": True} if already else {}),
                     **({"new_identity": True, "rebuilt": rebuilt}
                                          if new_identity else {}),
                     **({"claimed": True} if claim else {})}, output)


def _initialised(url: str) -> bool:
    """Whether the database at ``url`` (an existing file) has its labelq identity."""
    from labelq.errors import LabelqError
    from labelq.record.db import database_id, engine_for
    engine = engine_for(url)
    try:
        database_id(engine)
        return True
    except LabelqError:
        return False
    finally:
        engine.dispose()


def _rehome(eng: Engine, redis_url: str | None, new: bool) -> list[str]:
    """``init --new-identity`` (a new uid and nonce, then every project's hot state rebuilt
    under it) or ``--claim``: this database made its identity's home on Redis. Returns
    the names of the projects rebuilt."""
    from sqlmodel import select

    from labelq.live.home import set_home
    from labelq.live.rebuild import rebuild_project
    from labelq.record.db import new_identity, session_scope
    from labelq.record.models import Project
    r = redis_client(redis_url)  # (first: Redis down changes nothing)
    if not new:
        set_home(eng, r)
        return []
    new_identity(eng)
    set_home(eng, r)
    with session_scope(eng) as s:
        projects = [(stored_id(p), p.name) for p in s.exec(select(Project)).all()]
    for pid, _name in projects:
        rebuild_project(eng, r, pid)
    return [name for _pid, name in projects]


@click.group()
def project() -> None:
    """Create and inspect projects."""


class ProjectRow(TypedDict):
    """A project as ``project create|update|list|show`` print it."""

    name: str
    labels: list[str]
    label_names: dict[str, str] | None
    instructions: str | None
    policy: str
    budget: float | None
    max_labels: int | None
    aggregation: str
    gold_schedule: str | None
    quality: dict[str, Any] | None
    show_suggestions: bool
    created: str


def _project_row(p: Project, full: bool = False) -> ProjectRow:
    """A project as the commands print it; ``full``: the instructions whole (else their
    first line, cut at 60 characters)."""
    text = p.instructions
    if text and not full:
        first = text.splitlines()[0]
        text = first[:60] + ("…" if len(first) > 60 or "\n" in text else "")
    return {"name": p.name, "labels": p.labels, "label_names": p.label_names or None,
            "instructions": text, "policy": spec_text(p.policy),
            "budget": p.budget, "max_labels": p.max_labels, "aggregation": p.aggregation,
            "gold_schedule": p.gold_schedule, "quality": p.quality or None,
            "show_suggestions": bool(p.show_suggestions),
            "created": p.created.isoformat(timespec="seconds")}


@project.command("create")
@click.argument("name")
@click.option("--labels", required=True,
              help="Comma-separated label set, e.g. 0,1 or cat,dog,bird.")
@click.option("--policy", default="auto", show_default=True,
              help="Assignment policy spec: name or name:key=value,...")
@click.option("--budget", type=float, default=None, help="Total budget (sum of label costs).")
@click.option("--max-labels", type=int, default=None, help="Maximum labels per task (gold exempt).")
@click.option("--aggregation", default=None,
              help="Default aggregation method for exports: auto, mv, wmv, ds, onecoin, glad, "
                   "kos (binary labels only), ds-category, policy (default: policy for "
                   "bbta, else auto).")
@GOLD_OPTION
@QUALITY_OPTION
@INSTRUCTIONS_OPTION
@LABEL_NAMES_OPTION
@SUGGESTIONS_OPTION
@DB_OPTION
@OUTPUT_OPTION
def create(name: str, labels: str, policy: str, budget: float | None, max_labels: int | None,
           aggregation: str | None, gold_schedule: str | None, quality: str | None,
           instructions: str | None, label_names: str | None,
           show_suggestions: bool | None, database_url: str | None,
           output: Output) -> None:
    """Create project NAME."""
    from labelq.record.db import session_scope
    from labelq.record.projects import create_project, read_instructions

    text = read_instructions(instructions) if instructions else None
    with session_scope(engine(database_url)) as s:
        p = create_project(s, name, labels, policy=policy, budget=budget,
                           max_labels=max_labels, aggregation=aggregation,
                           gold_schedule=gold_schedule, quality=quality,
                           instructions=text, label_names=label_names,
                           show_suggestions=bool(show_suggestions))
        emit_record(_project_row(p), output)
        _warn_suggestion_leak(s, p)


def _warn_suggestion_leak(session: Any, p: Any) -> None:
    """Warn (stderr) when the project shows suggestions and its gold questions lack a
    model's prediction more often than its tasks (labelq.reporting.suggestion_leak)."""
    from labelq.reporting import suggestion_warnings
    for line in suggestion_warnings(session, p):
        click.secho(f"warning: {line}", fg="yellow", err=True)


@project.command("update")
@click.argument("name")
@click.option("--budget", type=float, default=None, help="New total budget.")
@click.option("--max-labels", type=int, default=None, help="New maximum labels per task.")
@click.option("--aggregation", default=None, help="New default aggregation method.")
@GOLD_OPTION
@QUALITY_OPTION
@INSTRUCTIONS_OPTION
@LABEL_NAMES_OPTION
@SUGGESTIONS_OPTION
@DB_OPTION
@OUTPUT_OPTION
def update(name: str, budget: float | None, max_labels: int | None, aggregation: str | None,
           gold_schedule: str | None, quality: str | None, instructions: str | None,
           label_names: str | None, show_suggestions: bool | None, database_url: str | None,
           output: Output) -> None:
    """Change settings of project NAME (the policy stays: create a new project to change it).
    Instructions and label names reach the labeling page at an annotator's next sign-in
    or reload."""
    from labelq.record.db import session_scope
    from labelq.record.projects import budget_spent, read_instructions, update_project

    text = (read_instructions(instructions) or "") if instructions else None
    with session_scope(engine(database_url)) as s:
        p = update_project(s, name, budget=budget, max_labels=max_labels,
                           aggregation=aggregation, gold_schedule=gold_schedule,
                           quality=quality, instructions=text, label_names=label_names,
                           show_suggestions=show_suggestions)
        spent = budget_spent(s, p) if budget is not None else 0.0
        emit_record(_project_row(p), output)
        if show_suggestions:
            _warn_suggestion_leak(s, p)
    if budget is not None and spent >= budget:
        click.echo(f"warning: {spent:g} of the budget is already spent, so a budget of "
                   f"{budget:g} issues no more assignments", err=True)


@project.command("list")
@DB_OPTION
@OUTPUT_OPTION
def list_(database_url: str | None, output: Output) -> None:
    """List projects."""
    from labelq.record.db import session_scope
    from labelq.record.projects import list_projects
    with session_scope(engine(database_url)) as s:
        emit([_project_row(p) for p in list_projects(s)], output)


@project.command("show")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def show(name: str, database_url: str | None, output: Output) -> None:
    """Show project NAME."""
    with project_session(engine(database_url), name) as (_, p):
        emit_record(_project_row(p, full=True), output)


@project.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Really delete (without it, say what would go).")
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def delete(name: str, yes: bool, database_url: str | None, redis_url: str | None,
           output: Output) -> None:
    """Delete project NAME with its tasks, gold, annotators (their tokens stop working) and
    labels — export first what you want to keep. Stop its annotators' traffic first. Its
    reviewers no longer review it (one of it alone is removed)."""
    from labelq.record.db import session_scope
    from labelq.record.projects import delete_project, get_project, project_counts

    eng = engine(database_url)
    with session_scope(eng) as s:
        p = get_project(s, name)
        pid, counts = stored_id(p), project_counts(s, p)
    what = ", ".join(f"{k}: {n}" for k, n in counts.items())
    if not yes:
        raise click.UsageError(f"this would delete project {name!r} with {what}; "
                               "add --yes to do it")
    # the hot state goes first: were the SQL delete to fail, the project would rebuild it
    # from SQL on its next use; the other way round, a new project given the same id
    # (SQLite reuses the largest) would find this one's state
    # (only this database's keys: another database sharing the Redis database may have a
    # project of the same id, labelq.live.redis.keys)
    from labelq.live.home import claim_home
    from labelq.live.rebuild import delete_hot
    from labelq.live.redis.keys import Keys
    r = redis_client(redis_url)
    k = Keys(pid, claim_home(eng, r))
    r.srem(k.projects, pid)
    delete_hot(r, k)
    with session_scope(eng) as s:
        delete_project(s, get_project(s, name))
    if output == "table":
        click.echo(f"deleted project {name!r} ({what})")
    else:
        emit_record({"deleted": name, **counts}, output)


commands = [init, project]
