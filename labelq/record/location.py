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
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # (sqlalchemy is imported only by what opens a database)
    from sqlalchemy.engine import Engine

    from .settings import Settings

__all__ = ["CONFIG_NAME", "Location", "locate", "default_database_url", "find_config",
           "open_configured",
           "per_user_url", "open_database", "write_config", "sqlite_path",
           "refuse_memory", "sqlite_file_kind", "check_sqlite_file"]

CONFIG_NAME = "labelq.toml"


@dataclass(frozen=True)
class Location:
    """A database URL and where it came from (said in every error about it)."""

    url: str
    source: str  # "--database-url", "LABELQ_DATABASE_URL", "<path>/labelq.toml", "per-user default"

    @property
    def shown(self) -> str:
        """The URL with its password masked."""
        from .db import masked_url
        return masked_url(self.url)

    def describe(self) -> str:
        return f"{self.shown} (from {self.source})"


def per_user_url(env: Mapping[str, str] | None = None) -> str:
    """The per-user default database: ``$XDG_DATA_HOME/labelq/labelq.db``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home())
                                           / ".local" / "share")
    return f"sqlite:///{Path(base) / 'labelq' / 'labelq.db'}"


def find_config(cwd: str | Path | None = None) -> Path | None:
    """The nearest ``labelq.toml`` in ``cwd`` (default: the current folder) or above."""
    here = Path(cwd or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            return _read_simple(path)
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = tomllib.load(f)
            return data
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a valid TOML file: {exc}", file=str(path)) from exc


def _read_simple(path: Path) -> dict[str, Any]:
    """``key = "value"`` lines (Python 3.10 without tomli)."""
    out: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*(#.*)?', line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL (``None``: not SQLite, or in memory)."""
    if not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url
    try:
        database = make_url(url).database
    except Exception:  # noqa: BLE001 - not a URL: the settings' check says so
        return None
    return database if database not in (None, "", ":memory:") else None


def refuse_memory(location: Location) -> None:
    """:class:`ConfigError` (exit code 2) for an in-memory SQLite database, with the
    reason: ``init`` would make it and every later process find nothing there."""
    from .db import MEMORY_REFUSED, is_memory_sqlite
    if is_memory_sqlite(location.url):
        raise ConfigError(f"database {location.describe()}: {MEMORY_REFUSED}",
                          database=location.shown)


# the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"
# the tables that make a SQLite database labelq's (an earlier labelq's has no identity)
_LABELQ_TABLES = ("labelq_database", "project")


def sqlite_file_kind(file: str | Path) -> str:
    """What a SQLite URL's file is, found without writing a byte to it (its header read,
    then its table names through a read-only connection): ``"missing"``, ``"empty"`` (no
    bytes: SQLite makes it a database), ``"labelq"``, ``"other"`` (a SQLite database
    without labelq's tables) or ``"not-sqlite"``."""
    import sqlite3

    path = Path(file)
    if not path.exists():
        return "missing"
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return "not-sqlite"
    if not head:
        return "empty"
    if head != SQLITE_HEADER:
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
    from .db import SchemaMissing
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


def _from_config(path: Path) -> str:
    data = _read_toml(path)
    url = data.get("database_url")
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{path}: no database_url = \"...\" (the database this folder "
                          "uses; labelq init --here writes one)", file=str(path))
    file = sqlite_path(url)
    if file is not None and not Path(file).is_absolute():
        # relative to the file's folder, not to wherever a command runs
        url = url[: len(url) - len(file)] + str((path.parent / file).resolve())
    return url


def default_database_url(env: Mapping[str, str] | None = None,
                         cwd: str | Path | None = None) -> str:
    """The URL used when ``LABELQ_DATABASE_URL`` is unset: the nearest ``labelq.toml``'s,
    else the per-user default."""
    config = find_config(cwd)
    return _from_config(config) if config is not None else per_user_url(env)


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
        return Location(_from_config(config), str(config))
    return Location(per_user_url(env), "per-user default; no labelq.toml in this folder or "
                                       "above, LABELQ_DATABASE_URL unset")


def open_database(location: Location, sqlalchemy_url: str | None = None) -> Engine:
    """The engine of an existing, initialised database (its identity read and cached), or
    :class:`labelq.errors.ServiceUnavailable` (exit code 9) saying where it looked and to
    run ``labelq init``. Never creates a file, a table or a row."""
    from ..errors import ServiceUnavailable
    from .db import SchemaMissing, database_id, engine_for

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


def write_config(folder: str | Path, url: str) -> Path:
    """``labelq.toml`` in ``folder`` naming ``url`` (``labelq init --here``)."""
    path = Path(folder) / CONFIG_NAME
    escaped = url.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text("# labelq's database for this folder and the folders below it\n"
                    "# (read by every labelq command, the API and the Celery worker started\n"
                    "# here; LABELQ_DATABASE_URL or --database-url override it)\n"
                    f'database_url = "{escaped}"\n', encoding="utf-8")
    return path


def open_configured(settings: Settings) -> Engine:
    """:func:`open_database` for the database ``settings`` name (the API's, the Celery
    worker's): said to come from where :func:`locate` finds it, when it is that one."""
    found = locate()
    location = found if found.url == settings.database_url else \
        Location(settings.database_url, "the settings given")
    return open_database(location, settings.sqlalchemy_url)
