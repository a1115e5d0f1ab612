"""Where the database is: one answer, the same in every process, and never a new empty one.

A command run from the wrong folder used to open (and create) ``./labelq.db`` there, and
answer "no project named 'reviews'". Now the database's URL is, in this order:

1. ``--database-url URL`` (a command's option);
2. ``LABELQ_DATABASE_URL``;
3. the nearest ``labelq.toml`` in the current folder or one above it, key
   ``database_url`` (``labelq init --here`` writes one; a relative SQLite path in it is
   taken from the file's folder, so it does not depend on where a command runs);
4. the per-user default ``sqlite:///$XDG_DATA_HOME/labelq/labelq.db`` (XDG_DATA_HOME
   defaults to ``~/.local/share``): one database per user, whatever the folder.

Only ``labelq init`` creates a database or its schema (and the demo, in its own folder);
every other command, the API and the Celery worker open an existing database with its
identity (:func:`labelq.record.db.database_id`) or stop with exit code 9, saying where they looked
(:class:`Location`, :func:`open_database`). Errors that something was not found name the
database too (``labelq`` adds it to the message).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError

# (the labelq.toml side and the URL helpers live below this module and .settings, which
# both use them: issue 43; named here too, as they always were)
from .configfile import (
    CONFIG_NAME,
    config_url,
    default_database_url,
    find_config,
    per_user_url,
    write_config,
)
from .dburl import MEMORY_REFUSED, SchemaMissing, is_memory_sqlite, masked_url, sqlite_path

if TYPE_CHECKING:  # (sqlalchemy is imported only by what opens a database)
    from sqlalchemy.engine import Engine

    from .settings import Settings

__all__ = ["CONFIG_NAME", "Location", "locate", "default_database_url", "find_config",
           "open_configured",
           "per_user_url", "open_database", "write_config", "sqlite_path",
           "refuse_memory", "sqlite_file_kind", "check_sqlite_file"]


@dataclass(frozen=True)
class Location:
    """A database URL and where it came from (said in every error about it)."""

    url: str
    source: str  # "--database-url", "LABELQ_DATABASE_URL", "<path>/labelq.toml", "per-user default"

    @property
    def shown(self) -> str:
        """The URL with its password masked."""
        return masked_url(self.url)

    def describe(self) -> str:
        return f"{self.shown} (from {self.source})"


def refuse_memory(location: Location) -> None:
    """:class:`ConfigError` (exit code 2) for an in-memory SQLite database, with the
    reason: ``init`` would make it and every later process find nothing there."""
    if is_memory_sqlite(location.url):
        raise ConfigError(f"database {location.describe()}: {MEMORY_REFUSED}",
                          database=location.shown)


# the smallest page of SQLite: a database file with anything in it holds one page at least
_SQLITE_MIN_PAGE = 512
# the tables that make a SQLite database labelq's (an earlier labelq's has no identity)
_LABELQ_TABLES = ("labelq_database", "project")


def sqlite_file_kind(file: str | Path) -> str:
    """What a SQLite URL's file is, found without writing a byte to it (its size, then its
    table names through a read-only connection, which SQLite refuses for a file without
    its header; a file shorter than SQLite's smallest page is none of its): ``"missing"``,
    ``"empty"`` (no bytes: SQLite makes it a database), ``"labelq"``, ``"other"`` (a
    SQLite database without labelq's tables) or ``"not-sqlite"``.

    The file is never opened but by SQLite: SQLite's locks are POSIX locks, which a
    process loses on *every* descriptor of the file when it closes *any* one of them.
    This runs again in processes that already hold connections to the file (``labelq
    serve`` opened the database, then the API did; a Celery task opens it per task): a
    plain ``open``/``close`` of the header dropped their locks, the next command to close
    its connection took the file as unused, checkpointed and deleted the write-ahead log
    under them, and the API went on reading the deleted log: tokens enrolled after
    ``labelq serve`` started answered "unknown token", its own writes unseen by others.
    SQLite's own read-only connection keeps the process's locks (it defers closing a
    descriptor while another connection of the process holds a lock)."""
    import sqlite3

    path = Path(file)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "not-sqlite"
    if size == 0:
        return "empty"
    if size < _SQLITE_MIN_PAGE:  # (SQLite reads a few stray bytes as an empty database)
        return "not-sqlite"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return "not-sqlite"
    if any(t in names for t in _LABELQ_TABLES):
        return "labelq"
    return "other" if names else "empty"


def check_sqlite_file(location: Location, *, creating: bool) -> None:
    """Refuse, before any connection that could write to it (a PRAGMA, a table), a SQLite
    file that is not a labelq database: :class:`ServiceUnavailable` (exit code 9), the
    file byte for byte as it was. ``creating`` (``labelq init``): a missing or empty file
    is fine, and so is a labelq database (its schema upgraded); a SQLite database of
    something else is not made labelq's."""
    file = sqlite_path(location.url)
    if file is None:
        return
    kind = sqlite_file_kind(file)
    if kind == "not-sqlite":
        raise SchemaMissing(f"not a labelq database: {location.describe()} is not a SQLite "
                            "database file (left as it was)", database=location.shown)
    if kind == "other":
        raise SchemaMissing(f"not a labelq database: {location.describe()} is a SQLite "
                            "database without labelq's tables (left as it was)"
                            + ("; labelq init makes its schema only in a new or empty "
                               "file, or upgrades a labelq database" if creating else ""),
                            database=location.shown)
    if not creating and kind == "empty":
        raise SchemaMissing(f"the database at {location.describe()} is empty (no labelq "
                            "schema): run `labelq init`", database=location.shown)


def locate(explicit: str | None = None, env: Mapping[str, str] | None = None,
           cwd: str | Path | None = None) -> Location:
    """The database to use, and where that was said (module docstring)."""
    env = os.environ if env is None else env
    if explicit:
        return Location(explicit, "--database-url")
    if env.get("LABELQ_DATABASE_URL"):
        return Location(env["LABELQ_DATABASE_URL"], "LABELQ_DATABASE_URL")
    config = find_config(cwd)
    if config is not None:
        return Location(config_url(config), str(config))
    return Location(per_user_url(env), "per-user default; no labelq.toml in this folder or "
                                       "above, LABELQ_DATABASE_URL unset")


def open_database(location: Location, sqlalchemy_url: str | None = None) -> Engine:
    """The engine of an existing, initialised database (its identity read and cached), or
    :class:`labelq.errors.ServiceUnavailable` (exit code 9) saying where it looked and to
    run ``labelq init``. Never creates a file, a table or a row."""
    from ..errors import ServiceUnavailable
    from .db import database_id, engine_for

    refuse_memory(location)
    file = sqlite_path(location.url)
    if file is not None and not Path(file).exists():
        raise SchemaMissing(
            f"no labelq database at {location.describe()}: run `labelq init` to create it "
            "there, or point to yours (--database-url, LABELQ_DATABASE_URL or a labelq.toml "
            "with database_url in this folder or above)", database=location.shown)
    check_sqlite_file(location, creating=False)
    from .settings import Settings
    engine = engine_for(sqlalchemy_url or Settings(database_url=location.url).sqlalchemy_url)
    try:
        database_id(engine)
    except SchemaMissing as exc:
        raise SchemaMissing(f"the database at {location.describe()} has no labelq schema "
                            "(or one of an earlier labelq): run `labelq init`",
                            database=location.shown) from exc
    except ServiceUnavailable as exc:
        raise ServiceUnavailable(f"{exc} (database from {location.source})",
                                 database=location.shown) from exc
    return engine


def open_configured(settings: Settings) -> Engine:
    """:func:`open_database` for the database ``settings`` name (the API's, the Celery
    worker's): said to come from where :func:`locate` finds it, when it is that one."""
    found = locate()
    location = found if found.url == settings.database_url else \
        Location(settings.database_url, "the settings given")
    return open_database(location, settings.sqlalchemy_url)
