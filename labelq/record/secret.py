"""The database's server secret: the key of the MAC in the assignment ids its servers issue
(:mod:`labelq.live.leaseid`), so that a submit whose lease was lost with Redis is taken
again only for an id this database issued to this annotator.

It is a column of the identity row (``labelq_database.secret``, 32 random bytes as hex),
made by ``labelq init`` — on a new database, and by the upgrade ``init`` does of a database
made before the column existed — and read once per engine and process (the request path
never asks SQL for it). A process never makes it: a database without one has not been
upgraded, and :func:`assignment_key` says to run ``labelq init``. Anyone who can read the
database can read the secret (and could write labels there directly anyway).
"""

from __future__ import annotations

import secrets
import threading

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session as OrmSession

from .dburl import SchemaMissing, masked_url

__all__ = ["ensure_secret", "assignment_key", "forget_secret"]

# engine -> its database's secret (bytes), read once per process
_keys: dict[Engine, bytes] = {}
_lock = threading.Lock()


def _engine(bind: Engine | Connection | OrmSession) -> Engine:
    # (an engine's .engine is itself, a connection's its engine)
    return (bind.get_bind() if isinstance(bind, OrmSession) else bind).engine


def _read(engine: Engine) -> str | None:
    with engine.connect() as conn:
        got = conn.execute(text("SELECT secret FROM labelq_database WHERE id = 1")).scalar()
    return str(got) if got else None


def ensure_secret(engine: Engine) -> str:
    """The secret of the database behind ``engine``, made if it has none (``labelq init``
    only; two racing: the first write wins, both read it back)."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE labelq_database SET secret = :s WHERE id = 1 AND "
                          "secret IS NULL"), {"s": secrets.token_hex(32)})
    got = _read(engine)
    assert got is not None, "the identity row exists (init made it first)"
    with _lock:
        _keys[engine] = bytes.fromhex(got)
    return got


def assignment_key(bind: Engine | Connection | OrmSession) -> bytes:
    """The key of the assignment ids' MAC for the database behind ``bind``: read from SQL
    once per engine and process, then from memory. Raises
    :class:`~labelq.record.db.SchemaMissing` (exit code 9) for a database ``labelq init``
    has not given one (made by an earlier labelq, not upgraded yet)."""
    engine = _engine(bind)
    key = _keys.get(engine)
    if key is not None:
        return key
    try:
        got = _read(engine)
    except (OperationalError, ProgrammingError) as exc:
        got = None
        if "secret" not in str(getattr(exc, "orig", exc)).lower() and \
                "labelq_database" not in str(getattr(exc, "orig", exc)).lower():
            raise
    if got is None:
        raise SchemaMissing(f"database {masked_url(engine.url)} has no server secret for "
                            "its assignment ids (made by an earlier labelq): run `labelq "
                            "init` to upgrade it", database=masked_url(engine.url))
    key = bytes.fromhex(got)
    with _lock:
        _keys[engine] = key
    return key


def forget_secret(engine: Engine) -> None:
    """Drop the cached secret (a test that drops and recreates a database's tables)."""
    with _lock:
        _keys.pop(engine, None)
