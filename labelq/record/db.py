"""Engine and sessions for the durable record."""

from __future__ import annotations

import os
import secrets
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, SQLModel, create_engine

from ..errors import ConfigError, ServiceUnavailable
from . import models  # noqa: F401 - registers the tables on SQLModel.metadata

# (the URL helpers and SchemaMissing live in .dburl, below this module and .secret and
# .location, which use them; named here too, as they always were)
from .dburl import MEMORY_REFUSED, SchemaMissing, is_memory_sqlite, masked_url
from .secret import ensure_secret, forget_secret
from .settings import Settings, load_settings

__all__ = ["get_engine", "init_schema", "session_scope", "engine_for", "ADDED_COLUMNS",
           "ADDED_INDEXES", "RELAXED_UNIQUE", "BACKFILLS", "database_id", "masked_url", "SchemaMissing",
           "DatabaseHome", "database_home", "new_identity", "MEMORY_REFUSED"]

# Columns added to a table after its first release. ``create_all`` creates missing tables
# but never alters an existing one, so ``init_schema`` adds these (nullable, no default) to
# a database created before them. A new column goes here, nullable; nothing else to do.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "project": ("instructions", "label_names", "show_suggestions"),
    "label": ("suggested",),
    "task": ("marked", "gold_kind", "gold_source"),
    "status_tally": ("version",),
    "labelq_database": ("nonce", "secret"),
    "worker": ("preferred",),
}
# Indexes added to a table after its first release (``create_all`` skips an existing
# table's indexes too): ``init_schema`` creates each one a database lacks.
ADDED_INDEXES: dict[str, tuple[str, ...]] = {
    "label": ("ix_label_project_applied",),
    "task": ("ix_task_project_marked",),
    "assignment": ("ix_assignment_gold",),
    "worker": ("uq_worker_project_handle",),
}
# Indexes that were unique and no longer are: ``init_schema`` drops each one a database
# still has as unique and creates it again as declared (after :data:`ADDED_INDEXES`, so a
# narrower unique index stands first). ``ix_worker_handle``: a handle named one annotator
# across all projects until issue 43; now a person is enrolled per project
# (``uq_worker_project_handle``).
RELAXED_UNIQUE: dict[str, tuple[str, ...]] = {
    "worker": ("ix_worker_handle",),
}

# Values an added column takes in the rows written before it: (table, column, value,
# condition). ``init_schema`` sets each where the column is NULL and the condition holds
# (every ``init``: idempotent, and it also catches rows an older process still running
# wrote after the upgrade). Gold loaded as gold is ``loaded``; tasks marked gold before
# kinds existed were chosen by someone, so ``reviewed`` (docs/gold.md, "Kinds of gold").
BACKFILLS: tuple[tuple[str, str, str, str], ...] = (
    ("task", "gold_kind", "loaded", "is_gold AND marked IS NULL"),
    ("task", "gold_kind", "reviewed", "is_gold AND marked IS NOT NULL"),
)


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # (no journal_mode here: it is written into the file, so only ``init_schema`` sets it
    # — WAL, kept by the file from then on; a command that only reads never changes a
    # file's journal mode, issue 45)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


@lru_cache(maxsize=16)
def engine_for(url: str) -> Engine:
    if url.startswith("sqlite"):
        if is_memory_sqlite(url):
            raise ConfigError(f"database {masked_url(url)}: {MEMORY_REFUSED}")
        # a server's request threads each hold a connection: keep up to 32 open, so that
        # a busy API process does not open (and set up) a connection per request beyond
        # the default 5; SQLite connections to one file are cheap to keep
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               pool_size=32, max_overflow=32)
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
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:  # (persistent: the file keeps it)
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        SQLModel.metadata.create_all(engine)
        _add_columns(engine)
        _add_indexes(engine)
        _relax_unique(engine)
        _backfill(engine)
        uid, nonce = _ensure_identity(engine)
        ensure_secret(engine)  # (labelq.record.secret: the assignment ids' key)
    except OperationalError as exc:
        raise ServiceUnavailable(f"database unavailable: {exc.orig}") from exc
    with _ids_lock:
        _ids[engine] = uid
        _nonces[engine] = nonce
        _homes.pop(engine, None)
    return uid


# engine -> its database's identity, read once per process (the request path never asks SQL)
_ids: dict[Engine, str] = {}
# engine -> its identity's creation nonce, read with it (``None``: an earlier labelq's row)
_nonces: dict[Engine, str | None] = {}
_ids_lock = threading.Lock()


def _read_identity(engine: Engine) -> str | None:
    row = _read_identity_row(engine)
    return row[0] if row is not None else None


def _read_identity_row(engine: Engine) -> tuple[str, str | None] | None:
    """(uid, nonce) of the identity row; ``None``: no labelq schema or no row. The row's
    columns are read by name (``SELECT *``), so a database of an earlier labelq, without
    the columns added since (``nonce``: ``None``), is read too, until ``init`` adds them."""
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SELECT * FROM labelq_database WHERE id = 1").first()
    except (OperationalError, ProgrammingError) as exc:
        if _is_missing_table(exc):
            return None
        raise ServiceUnavailable(f"database {masked_url(engine.url)} unavailable: "
                                 f"{getattr(exc, 'orig', exc)}") from exc
    if row is None:
        return None
    values = row._mapping
    return str(values["uid"]), values.get("nonce")


def _is_missing_table(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    # (SQLite: "no such table"; PostgreSQL: 'relation "..." does not exist' — not a missing
    # database, which is unavailable, not uninitialised)
    return "no such table" in text or ("relation" in text and "does not exist" in text)


def _ensure_identity(engine: Engine) -> tuple[str, str]:
    """The identity row, made if missing (two ``init`` racing: the loser reads the
    winner's), and given a nonce if it has none: (uid, nonce)."""
    from .models import DatabaseIdentity
    row = _read_identity_row(engine)
    if row is not None:
        if row[1] is None:  # (an identity made before the nonce: given one now)
            with Session(engine) as session:
                identity = session.get(DatabaseIdentity, 1)
                assert identity is not None
                if identity.nonce is None:
                    identity.nonce = secrets.token_hex(8)
                    session.add(identity)
                    session.commit()
                return identity.uid, identity.nonce
        return row[0], row[1]
    try:
        with Session(engine) as session:
            session.add(DatabaseIdentity(id=1, uid=secrets.token_hex(6),
                                         nonce=secrets.token_hex(8)))
            session.commit()
    except IntegrityError:
        pass
    made = _read_identity_row(engine)
    assert made is not None and made[1] is not None
    return made[0], made[1]


def new_identity(engine: Engine) -> str:
    """A new uid, nonce and assignment-id secret for the database (``labelq init --new-identity``: a copy made
    its own database; its hot state is then rebuilt under the new uid's keys, and the
    original's are left alone). Returns the new uid."""
    from .models import DatabaseIdentity
    init_schema(engine)
    uid, nonce = secrets.token_hex(6), secrets.token_hex(8)
    with Session(engine) as session:
        identity = session.get(DatabaseIdentity, 1)
        assert identity is not None
        # a new secret too: ids the original issued are not the copy's (labelq.record.secret)
        identity.uid, identity.nonce, identity.secret = uid, nonce, secrets.token_hex(32)
        session.add(identity)
        session.commit()
    with _ids_lock:
        _ids[engine] = uid
        _nonces[engine] = nonce
        _homes.pop(engine, None)
    forget_secret(engine)
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
    row = _read_identity_row(engine)
    if row is None:
        raise SchemaMissing(f"database {masked_url(engine.url)} has no labelq schema (or one "
                            "of an earlier labelq): run `labelq init` to set it up",
                            database=masked_url(engine.url))
    with _ids_lock:
        _ids[engine] = row[0]
        _nonces[engine] = row[1]
    return row[0]


def forget_database_id(engine: Engine) -> None:
    """Drop the cached identity (a test that drops and recreates a database's tables)."""
    with _ids_lock:
        _ids.pop(engine, None)
        _nonces.pop(engine, None)
        _homes.pop(engine, None)
    forget_secret(engine)


@dataclass(frozen=True)
class DatabaseHome:
    """Where a database lives, with its identity: what ``lq:{uid}:home`` holds in Redis
    (``labelq.live.home``). ``location`` is the comparison key, ``shown`` what a message
    says, ``path`` the SQLite file (``None`` for PostgreSQL).

    The location rule (docs/architecture.md, "A database that knows it is a copy"): a
    SQLite database is its file's resolved path (symbolic links and ``..`` followed); a
    PostgreSQL database is what the server says of itself — the cluster's
    ``system_identifier`` (``pg_control_system()``), the database's oid and the schema the
    tables live in (``current_schema()``) — never the URL's spelling, so ``localhost`` and
    ``127.0.0.1``, a socket or a port forward name the same database."""

    uid: str
    nonce: str
    location: str
    shown: str
    path: str | None


# engine -> its home, made once per process and engine (dropped with the identity)
_homes: dict[Engine, DatabaseHome] = {}


def database_home(engine: Engine) -> DatabaseHome:
    """The identity of ``engine``'s database with where it lives (read once per engine).
    Raises :class:`SchemaMissing` (exit code 9) for a database without an identity, or
    with one made before the nonce (``labelq init`` gives it one)."""
    home = _homes.get(engine)
    if home is not None and home.uid == _ids.get(engine):
        return home
    database_id(engine)  # (the identity and nonce, read once with it)
    row = (_ids[engine], _nonces.get(engine))
    if row[1] is None:
        raise SchemaMissing(f"database {masked_url(engine.url)} has no labelq identity with "
                            "a creation nonce (a database of an earlier labelq): run "
                            "`labelq init` to upgrade it", database=masked_url(engine.url))
    uid, nonce = row[0], row[1]
    if engine.dialect.name == "sqlite":
        path = os.path.realpath(engine.url.database or "")
        location, shown = f"sqlite:{path}", f"SQLite file {path}"
    elif engine.dialect.name == "postgresql":
        path = None
        location, shown = _postgres_location(engine)
    else:  # pragma: no cover - labelq runs on SQLite and PostgreSQL
        path = None
        location = shown = masked_url(engine.url)
    home = DatabaseHome(uid, nonce, location, shown, path)
    with _ids_lock:
        _ids[engine] = uid
        _homes[engine] = home
    return home


def _postgres_location(engine: Engine) -> tuple[str, str]:
    """(location key, shown) of a PostgreSQL database, from what its server says."""
    try:
        with engine.connect() as conn:
            name, schema, oid, port = conn.exec_driver_sql(
                "SELECT current_database(), current_schema(), "
                "(SELECT oid FROM pg_database WHERE datname = current_database()), "
                "inet_server_port()").one()
            try:
                with conn.begin_nested():
                    cluster = str(conn.exec_driver_sql(
                        "SELECT system_identifier FROM pg_control_system()").scalar())
            except (OperationalError, ProgrammingError):  # (no right to read it)
                addr = conn.exec_driver_sql("SELECT inet_server_addr()").scalar()
                cluster = f"{addr or 'socket'}:{port}"
    except (OperationalError, ProgrammingError) as exc:
        raise ServiceUnavailable(f"database {masked_url(engine.url)} unavailable: "
                                 f"{getattr(exc, 'orig', exc)}") from exc
    return (f"postgresql:{cluster}:{oid}:{schema}",
            f"PostgreSQL database {name!r} schema {schema!r} (port {port}, cluster "
            f"{cluster})")


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


def _relax_unique(engine: Engine) -> None:
    """Each of :data:`RELAXED_UNIQUE` a database still has as a unique index: dropped and
    created again as declared, in one transaction (PostgreSQL: the table is locked while
    the index is built; SQLite: its one writer), so no row slips in between."""
    insp = inspect(engine)
    for table_name, names in RELAXED_UNIQUE.items():
        unique = {ix["name"] for ix in insp.get_indexes(table_name) if ix.get("unique")}
        table = SQLModel.metadata.tables[table_name]
        for index in table.indexes:
            if index.name not in names or index.name not in unique:
                continue
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP INDEX {index.name}")
                index.create(conn)


def _backfill(engine: Engine) -> None:
    """Each of :data:`BACKFILLS`, in one transaction."""
    with engine.begin() as conn:
        for table_name, column, value, condition in BACKFILLS:
            table = SQLModel.metadata.tables[table_name]
            conn.execute(table.update().where(table.c[column].is_(None), text(condition))
                         .values({column: value}))


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
