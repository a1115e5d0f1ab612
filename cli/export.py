"""``labelq export NAME``."""

from __future__ import annotations

import os
import sys
import tempfile

import click

from labelq.db import session_scope
from labelq.projects import get_project
from labelq.reporting import iter_raw_labels, write_raw_labels

from ._common import DB_OPTION, engine


@click.command()
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv",
              show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, writable=True), default="-",
              help="Output file (default: standard output). Written atomically.")
@click.option("--raw", is_flag=True, default=True,
              help="Every label with worker, time and gold flag.")
@DB_OPTION
def export(name, fmt, out, raw, database_url):
    """Export the labels of project NAME."""
    with session_scope(engine(database_url)) as s:
        rows = iter_raw_labels(s, get_project(s, name))
        if out == "-":
            n = write_raw_labels(rows, sys.stdout, fmt)
        else:
            directory = os.path.dirname(os.path.abspath(out))
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".labelq-export-")
            try:
                with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
                    n = write_raw_labels(rows, fh, fmt)
                os.replace(tmp, out)
            except BaseException:
                os.unlink(tmp)
                raise
    if out != "-":
        click.echo(f"wrote {n} labels to {out}", err=True)


commands = [export]
