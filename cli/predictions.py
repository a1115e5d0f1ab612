"""``labelq predictions load|list|remove``: a model's predictions as one more source
(issue 42; labelq/record/predictions.py, docs/models.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from labelq.errors import LabelqError

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    REDIS_OPTION,
    Output,
    emit,
    emit_record,
    engine,
    project_session,
    redis_client,
    stored_id,
)
from .load import FORMAT_OPTION, FileFormat

if TYPE_CHECKING:  # (`labelq --help` imports no database library: tests/foundation/test_cli_start.py)
    from sqlalchemy.engine import Engine


@click.group()
def predictions() -> None:
    """A model's predictions: load them (each load a new version), list, remove."""


@predictions.command("load")
@click.argument("name")
@click.argument("file", type=click.Path())  # unreadable: InputError, exit 3
@click.option("--model", "model", required=True,
              help="The model's name (letters, digits, . _ -); loading again under it "
                   "makes its next version.")
@click.option("--normalise", is_flag=True,
              help="Divide a row whose probabilities do not sum to 1 by its sum (and say "
                   "how many), instead of refusing the file.")
@FORMAT_OPTION
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def predictions_load(name: str, file: str, model: str, normalise: bool,
                     fmt: FileFormat | None, database_url: str | None, redis_url: str | None,
                     output: Output) -> None:
    """Load FILE (CSV or JSONL: `id` and `p_<class>` for every class of the label set,
    or `id`, `label` and `score` — the rest of the score spread evenly over the other
    classes) as the next version of MODEL in project NAME. All or nothing: a bad row
    refuses the whole file (exit 3), naming its line and field."""
    from labelq.record.predictions import load_predictions

    click.echo(f"validating {file} ...", err=True)
    eng = engine(database_url)
    with project_session(eng, name) as (s, project):
        result = load_predictions(s, project, file, model=model, fmt=fmt,
                                  normalise=normalise)
        pid = stored_id(project)
    _refold(eng, redis_url, name, pid)
    if output != "table":
        emit_record(result.as_dict(), output)
        return
    fixed = (f"; normalised {result.normalised} row{'s' if result.normalised != 1 else ''} "
             "whose probabilities did not sum to 1") if normalise else ""
    click.echo(f"loaded {result.rows} predictions of model {model!r} into {name!r} as "
               f"{result.source}{fixed}")


@predictions.command("list")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def predictions_list(name: str, database_url: str | None, output: Output) -> None:
    """The models of project NAME: each version, its rows and when it was loaded."""
    from labelq.record.predictions import list_versions

    with project_session(engine(database_url), name) as (s, project):
        versions = list_versions(s, project)
    if not versions and output == "table":
        click.echo(f"no predictions in {name!r}")
        return
    emit([v.as_dict() for v in versions], output,
         columns=["model", "version", "source", "rows", "created"])


@predictions.command("remove")
@click.argument("name")
@click.option("--model", "model", required=True, help="The model whose predictions go.")
@click.option("--version", "version", type=click.IntRange(min=1), default=None,
              help="Only this version (default: every version of the model).")
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def predictions_remove(name: str, model: str, version: int | None, database_url: str | None,
                       redis_url: str | None, output: Output) -> None:
    """Remove MODEL's predictions (every version, or --version V) from project NAME."""
    from labelq.record.predictions import remove_predictions

    eng = engine(database_url)
    with project_session(eng, name) as (s, project):
        removed = remove_predictions(s, project, model, version)
        pid = stored_id(project)
    _refold(eng, redis_url, name, pid)
    if output != "table":
        emit_record({"project": name, "model": model,
                     "versions": [v.version for v in removed],
                     "sources": [v.source for v in removed],
                     "rows": sum(v.rows for v in removed)}, output)
        return
    for v in removed:
        click.echo(f"removed {v.source} ({v.rows} predictions) from {name!r}")


def _refold(eng: Engine, redis_url: str | None, name: str, project_id: int) -> None:
    """A new epoch for the project's hot state: every running process folds its policy
    state again, with the latest version of each model (as after ``gold correct``). Without
    Redis, a warning: they still notice at their next catch-up with SQL."""
    from labelq.live.home import claim_home
    from labelq.live.hotstate import bump_epoch
    from labelq.live.redis.keys import Keys
    try:
        r = redis_client(redis_url)
        bump_epoch(r, Keys(project_id, claim_home(eng, r)))
    except LabelqError as exc:
        click.echo(f"warning: {exc}; running processes take the new predictions at their "
                   f"next catch-up with SQL, or after 'labelq rebuild {name}'", err=True)


commands = [predictions]
