"""Engine and sessions for the durable record."""

from __future__ import annotations

import secrets
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import URL, event, inspect, make_url
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, SQLModel, create_engine, select

from ..errors import ServiceUnavailable
from . import models  # noqa: F401 - registers the tables on SQLModel.metadata
from .secret import ensure_secret, forget_secret
from .settings import Settings, load_settings

__all__ = ["get_engine", "init_schema", "session_scope", "engine_for", "ADDED_COLUMNS",
           "ADDED_INDEXES", "database_id", "masked_url", "SchemaMissing"]

# Columns added to a table after its first release. ``create_all`` creates missing tables
# but never alters an existing one, so ``init_schema`` adds these (nullable, no default) to
# a database created before them. A new column goes here, nullable; nothing else to do.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "project": ("instructions", "label_names"),
    "task": ("marked",),
    "status_tally": ("version",),
    "labelq_database": ("secret",),
}
# Indexes added to a table after its first release (``create_all`` skips an existing
# table's indexes too): ``init_schema`` creates each one a database lacks.
ADDED_INDEXES: dict[str, tuple[str, ...]] = {
    "label": ("ix_label_project_applied",),
    "task": ("ix_task_project_marked",),
    "assignment": ("ix_assignment_gold",),
}


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


@lru_cache(maxsize=16)
def engine_for(url: str) -> Engine:
    if url.startswith("sqlite"):
        # a server's request threads each hold a connection: keep up to 32 open, so that
        # a busy API process does not open (and set up) a connection per request beyond
        # the default 5; SQLite connections to one file are cheap to keep
        memory = make_url(url).database in (None, "", ":memory:")
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               **({} if memory else {"pool_size": 32, "max_overflow": 32}))
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
    _made.add(engine)
    return engine


# every engine engine_for made and still alive, for dispose_engines
_made: weakref.WeakSet[Engine] = weakref.WeakSet()


def dispose_engines() -> None:
    """Close the pooled connections of every engine :func:`engine_for` made (a process about
    to exit: SQLite then checkpoints and removes its write-ahead log, as it does when the
    interpreter's last garbage collection closes them)."""
    for engine in list(_made):
        engine.dispose()


def get_engine(settings: Settings | None = None) -> Engine:
    settings = settings or load_settings()
    return engine_for(settings.sqlalchemy_url)


def init_schema(engine: Engine) -> str:
    """Create every table that does not exist yet (safe to repeat), and the database's
    identity if it has none (a new database, or one of an earlier labelq). Only ``labelq
    init`` (and the demo, in its own folder) calls it; returns the identity."""
    try:
        SQLModel.metadata.create_all(engine)
        _add_columns(engine)
        _add_indexes(engine)
        uid = _ensure_identity(engine)
        ensure_secret(engine)  # (labelq.record.secret: the assignment ids' key)
    except OperationalError as exc:
        raise ServiceUnavailable(f"database unavailable: {exc.orig}") from exc
    with _ids_lock:
        _ids[engine] = uid
    return uid


class SchemaMissing(ServiceUnavailable):
    """The database has no labelq schema (or none with an identity): ``labelq init``."""


# engine -> its database's identity, read once per process (the request path never asks SQL)
_ids: dict[Engine, str] = {}
_ids_lock = threading.Lock()


def _read_identity(engine: Engine) -> str | None:
    from .models import DatabaseIdentity
    try:
        with Session(engine) as session:
            row = session.exec(select(DatabaseIdentity).where(DatabaseIdentity.id == 1)).first()
    except (OperationalError, ProgrammingError) as exc:
        if _is_missing_table(exc):
            return None
        raise ServiceUnavailable(f"database {masked_url(engine.url)} unavailable: "
                                 f"{getattr(exc, 'orig', exc)}") from exc
    return row.uid if row is not None else None


def _is_missing_table(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    # (SQLite: "no such table"; PostgreSQL: 'relation "..." does not exist' — not a missing
    # database, which is unavailable, not uninitialised)
    return "no such table" in text or ("relation" in text and "does not exist" in text)


def _ensure_identity(engine: Engine) -> str:
    """The identity row, made if missing (two ``init`` racing: the loser reads the winner's)."""
    from .models import DatabaseIdentity
    uid = _read_identity(engine)
    if uid is not None:
        return uid
    try:
        with Session(engine) as session:
            session.add(DatabaseIdentity(id=1, uid=secrets.token_hex(6)))
            session.commit()
    except IntegrityError:
        pass
    uid = _read_identity(engine)
    assert uid is not None
    return uid


def database_id(bind: Engine | Connection | OrmSession) -> str:
    """The identity of the database behind ``bind`` (an engine, a connection or a
    session), read from SQL once per engine and process, then from memory. Raises
    :class:`SchemaMissing` (exit code 9) for a database ``labelq init`` has not set up."""
    # (an engine's .engine is itself, a connection's its engine)
    engine = (bind.get_bind() if isinstance(bind, OrmSession) else bind).engine
    uid = _ids.get(engine)
    if uid is not None:
        return uid
    uid = _read_identity(engine)
    if uid is None:
        raise SchemaMissing(f"database {masked_url(engine.url)} has no labelq schema (or one "
                            "of an earlier labelq): run `labelq init` to set it up",
                            database=masked_url(engine.url))
    with _ids_lock:
        _ids[engine] = uid
    return uid


def forget_database_id(engine: Engine) -> None:
    """Drop the cached identity (a test that drops and recreates a database's tables)."""
    with _ids_lock:
        _ids.pop(engine, None)
    forget_secret(engine)


def masked_url(url: str | URL) -> str:
    """A database URL as it may be shown: its password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: show it as given
        return str(url)


def _add_columns(engine: Engine) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for each of :data:`ADDED_COLUMNS` a table lacks (two
    processes may race to add one: the loser finds it there and goes on)."""
    insp = inspect(engine)
    for table_name, names in ADDED_COLUMNS.items():
        have = {c["name"] for c in insp.get_columns(table_name)}
        table = SQLModel.metadata.tables[table_name]
        for name in names:
            if name in have:
                continue
            ddl = (f"ALTER TABLE {table_name} ADD COLUMN {name} "
                   f"{table.c[name].type.compile(engine.dialect)}")
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(ddl)
            except Exception:
                if name not in {c["name"] for c in inspect(engine).get_columns(table_name)}:
                    raise


def _add_indexes(engine: Engine) -> None:
    """``CREATE INDEX`` for each of :data:`ADDED_INDEXES` a table lacks (a racing process
    that created it first is fine)."""
    insp = inspect(engine)
    for table_name, names in ADDED_INDEXES.items():
        have = {ix["name"] for ix in insp.get_indexes(table_name)}
        table = SQLModel.metadata.tables[table_name]
        for index in table.indexes:
            if index.name not in names or index.name in have:
                continue
            try:
                index.create(engine, checkfirst=True)
            except Exception:
                if index.name not in {ix["name"] for ix in inspect(engine).get_indexes(
                        table_name)}:
                    raise


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session committed on success and rolled back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise
