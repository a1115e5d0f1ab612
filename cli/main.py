"""Entry point of the ``labelq`` command.

Exit codes: 0 success; 1 unexpected labelq error; 2 bad configuration (LABELQ_* variable)
or usage; 3 bad input file or argument; 4 not found; 5 conflict; 6 forbidden; 7 budget
exhausted; 8 invalid policy spec; 9 Redis or database unavailable. (See labelq/errors.py.)

Command modules live beside this file; each exposes ``commands``, a list of Click commands
or groups, and is picked up automatically (modules starting with ``_`` are helpers).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import click

from labelq import __version__
from labelq.errors import LabelqError, NotFound
from labelq.settings import check_environment

COMMAND_MODULES = sorted(
    m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
    if not m.name.startswith("_") and m.name != "main"
)


class LabelqGroup(click.Group):
    """Turns labelq errors into one clear line on stderr and a documented exit code."""

    def invoke(self, ctx: click.Context):
        from ._common import OPENED
        OPENED.clear()  # (one command per process, but tests invoke many in one)
        try:
            if not _asks_for_help(ctx):
                # every LABELQ_* variable, before any command: a command given its database
                # by --database-url/LABELQ_DATABASE_URL used to read no other setting, so a
                # malformed one passed unnoticed there and failed elsewhere
                check_environment()
            return super().invoke(ctx)
        except LabelqError as exc:
            message = str(exc)
            if isinstance(exc, NotFound):
                # say where it looked: a command run with another database than meant
                # (another folder's labelq.toml, a stale LABELQ_DATABASE_URL) shows here
                from ._common import OPENED
                if OPENED:
                    message += f" (looked in the database at {OPENED[0].describe()})"
            click.secho(f"Error: {message}", fg="red", err=True)
            ctx.exit(exc.exit_code)


def _asks_for_help(ctx: click.Context) -> bool:
    protected = getattr(ctx, "_protected_args", None)  # Click >= 8.2; protected_args before
    args = [*(protected if protected is not None else ctx.protected_args), *ctx.args]
    return any(a in ("-h", "--help") for a in args)


@click.group(cls=LabelqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="labelq")
def cli() -> None:
    """labelq: run an in-house annotation workforce with budget-aware assignment."""


for _name in COMMAND_MODULES:
    for _cmd in importlib.import_module(f"cli.{_name}").commands:
        cli.add_command(_cmd)


def main() -> None:  # console-script entry point
    sys.exit(cli.main(prog_name="labelq", standalone_mode=True))


if __name__ == "__main__":
    main()
