"""``labelq tasks load`` and ``labelq gold load``."""

from __future__ import annotations

import sys

import click

from labelq.db import session_scope
from labelq.loading import load_tasks
from labelq.projects import get_project

from ._common import DB_OPTION, engine

FORMAT_OPTION = click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]),
                             default=None, help="File format (default: from the extension).")


class _Progress:
    """A progress bar on stderr, opened on the first report (when the total is known)."""

    def __init__(self, label: str) -> None:
        self.label, self.bar, self.done = label, None, 0

    def __call__(self, written: int, total: int) -> None:
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label,
                                         file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(written - self.done)
        self.done = written

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _load(name, file, fmt, database_url, gold: bool) -> None:
    what = "gold questions" if gold else "tasks"
    click.echo(f"validating {file} ...", err=True)
    progress = _Progress(f"writing {what}")
    try:
        with session_scope(engine(database_url)) as s:
            result = load_tasks(s, get_project(s, name), file, gold=gold, fmt=fmt,
                                progress=progress)
    finally:
        progress.close()
    skipped = (f"; {result.skipped_existing} already present, skipped"
               if result.skipped_existing else "")
    click.echo(f"loaded {result.inserted} {what} into {name!r}{skipped}")


@click.group()
def tasks():
    """Load tasks to be labeled."""


@tasks.command("load")
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@FORMAT_OPTION
@DB_OPTION
def tasks_load(name, file, fmt, database_url):
    """Load tasks from FILE (CSV or JSONL with `id`, optional `category`, any payload
    fields) into project NAME. All or nothing; ids already present are skipped."""
    _load(name, file, fmt, database_url, gold=False)


@click.group()
def gold():
    """Load gold questions (tasks whose answer is known)."""


@gold.command("load")
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@FORMAT_OPTION
@DB_OPTION
def gold_load(name, file, fmt, database_url):
    """Load gold questions from FILE (as for tasks, plus `answer`, which must be in the
    project's label set) into project NAME."""
    _load(name, file, fmt, database_url, gold=True)


commands = [tasks, gold]
