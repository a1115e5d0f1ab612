"""A database URL as labelq shows and checks it, and the error of a database without labelq's
schema: below :mod:`.db`, :mod:`.secret` and :mod:`.location`, which all use them (issue 43:
they lived in ``db``, which the other two import while it imported them back).

Imports nothing of labelq but :mod:`labelq.errors`, and SQLAlchemy only inside the functions
(``labelq --help`` imports no database library: tests/foundation/test_cli_start.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ServiceUnavailable

if TYPE_CHECKING:
    from sqlalchemy import URL

__all__ = ["MEMORY_REFUSED", "is_memory_sqlite", "masked_url", "sqlite_path", "SchemaMissing"]


# why an in-memory SQLite database is refused (issue 45: ``init`` passed, and every later
# command, each its own process with its own empty memory, said "run init")
MEMORY_REFUSED = ("an in-memory SQLite database lives only as long as one process, and every "
                  "labelq command, the API and each Celery worker is a process of its own: "
                  "name a file (sqlite:///path/labelq.db) or a PostgreSQL database")


def is_memory_sqlite(url: str) -> bool:
    """Whether ``url`` is an in-memory SQLite database (``sqlite://``,
    ``sqlite:///:memory:``, ``sqlite:///file:...?mode=memory``)."""
    if not url.startswith("sqlite"):
        return False
    from sqlalchemy import make_url
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - not a URL: the settings' check says so
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or "mode=memory" in url \
        or database.startswith("file::memory:")


class SchemaMissing(ServiceUnavailable):
    """The database has no labelq schema (or none with an identity): ``labelq init``."""


def masked_url(url: str | URL) -> str:
    """A database URL as it may be shown: its password replaced by ``***``."""
    from sqlalchemy import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: show it as given
        return str(url)


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
