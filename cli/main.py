"""Entry point of the ``labelq`` command.

Exit codes: 0 success; 1 unexpected labelq error; 2 bad configuration (LABELQ_* variable)
or usage; 3 bad input file or argument; 4 not found; 5 conflict; 6 forbidden; 7 budget
exhausted; 8 invalid policy spec; 9 Redis or database unavailable. (See labelq/errors.py.)

Command modules live beside this file; each exposes ``commands``, a list of Click commands
or groups (modules starting with ``_`` are helpers). :data:`COMMANDS` says which module
holds each top-level command, so a command imports only its own module (and the modules
hold their heavy imports inside the commands): ``labelq --help`` and ``labelq status``
start at once (tests/foundation/test_cli_start.py checks the table and the imports).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from labelq import __version__
from labelq.errors import LabelqError, NotFound
from labelq.record.settings import check_environment

# (a listing of this folder, as pkgutil.iter_modules gave, without importing pkgutil)
COMMAND_MODULES = sorted(
    name[:-3] for name in os.listdir(Path(__file__).parent)
    if name.endswith(".py") and not name.startswith("_") and name != "main.py"
)

# top-level command -> the module defining it (a new command is added here too)
COMMANDS = {
    "aggregate": "aggregate", "annotate": "annotate", "check": "check", "demo": "demo",
    "export": "export", "export-dataset": "export", "job": "export", "agreement": "export",
    "tasks": "load", "gold": "load",
    "run-worker": "pipeline", "worker": "pipeline", "rebuild": "pipeline", "next": "pipeline",
    "submit": "pipeline", "decline": "pipeline",
    "init": "project", "project": "project", "predictions": "predictions", "serve": "serve",
    "simulate": "simulate",
    "status": "status", "workers": "workforce", "reviewers": "reviewers",
    "hooks": "hooks",
}


def _module_commands(module: str) -> list[click.Command]:
    return list(importlib.import_module(f"cli.{module}").commands)


class _Commands(dict[str, click.Command]):
    """The group's commands, read from every module only when all are asked for (help,
    a walk over ``cli.commands``); one command's lookup imports its module alone."""

    def _load_all(self) -> None:
        if not getattr(self, "_loaded", False):
            self._loaded = True
            for name in COMMAND_MODULES:
                self._add(name)

    def _add(self, module: str) -> None:
        for cmd in _module_commands(module):
            if cmd.name is not None:  # (a click.command always has its name)
                dict.__setitem__(self, cmd.name, cmd)

    def one(self, name: str) -> click.Command | None:
        if not dict.__contains__(self, name) and name in COMMANDS:
            self._add(COMMANDS[name])
        return dict.get(self, name)


def _loading(method: str) -> Callable[..., object]:
    def call(self: _Commands, *args: object, **kwargs: object) -> object:
        self._load_all()
        return getattr(dict, method)(self, *args, **kwargs)
    call.__name__ = method
    return call


for _method in ("__getitem__", "__contains__", "__iter__", "__len__", "get", "keys",
                "values", "items", "copy", "__repr__"):
    setattr(_Commands, _method, _loading(_method))


class LabelqGroup(click.Group):
    """Turns labelq errors into one clear line on stderr and a documented exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # (click.Group's own)
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        commands = self.commands
        return commands.one(cmd_name) if isinstance(commands, _Commands) else \
            super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)

    def invoke(self, ctx: click.Context) -> object:
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



def main() -> None:  # console-script entry point
    try:
        sys.exit(cli.main(prog_name="labelq", standalone_mode=True))
    finally:
        _before_exit()


def _before_exit() -> None:
    """The interpreter's teardown, made short. A command imports a large stack (sqlalchemy,
    pydantic, sqlmodel: some 70,000 objects the garbage collector tracks, none of them
    garbage) and exits; the teardown, with its collector passes over all of them, took a
    fifth of ``labelq status``'s CPU time (0.450 s against 0.357 s with this; wall time
    0.462 s against 0.364 s: docs/benchmarks.md, cli-start, ``--plain-exit``). Frozen,
    they are left out of those passes. What such a pass would have closed is closed first:
    the database engines' pooled connections (SQLite checkpoints and removes its write-ahead
    log when the last one closes). The standard streams are flushed at exit as before, and
    atexit handlers still run."""
    db = sys.modules.get("labelq.record.db")
    if db is not None:
        db.dispose_engines()
    gc.freeze()


if __name__ == "__main__":
    main()
