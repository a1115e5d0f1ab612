"""Engine and sessions for the durable record."""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

from sqlalchemy import event, inspect, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, create_engine

from . import models  # noqa: F401 - registers the tables on SQLModel.metadata
from .errors import ServiceUnavailable
from .settings import Settings, load_settings

__all__ = ["get_engine", "init_schema", "session_scope", "engine_for", "ADDED_COLUMNS",
           "ADDED_INDEXES"]

# Columns added to a table after its first release. ``create_all`` creates missing tables
# but never alters an existing one, so ``init_schema`` adds these (nullable, no default) to
# a database created before them. A new column goes here, nullable; nothing else to do.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "project": ("instructions", "label_names"),
    "task": ("marked",),
}
# Indexes added to a table after its first release (``create_all`` skips an existing
# table's indexes too): ``init_schema`` creates each one a database lacks.
ADDED_INDEXES: dict[str, tuple[str, ...]] = {
    "label": ("ix_label_project_applied",),
}


def _sqlite_pragmas(dbapi_conn, _record) -> None:
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
    return engine


def get_engine(settings: Settings | None = None) -> Engine:
    settings = settings or load_settings()
    return engine_for(settings.sqlalchemy_url)


def init_schema(engine: Engine) -> None:
    """Create every table that does not exist yet (safe to repeat)."""
    try:
        SQLModel.metadata.create_all(engine)
        _add_columns(engine)
        _add_indexes(engine)
    except OperationalError as exc:
        raise ServiceUnavailable(f"database unavailable: {exc.orig}") from exc


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
