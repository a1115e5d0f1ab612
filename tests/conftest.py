"""Shared fixtures.

* ``shared_datasets`` — the papers' data sets in ``../shared/datasets``. Outside CI a test
  that needs them skips with a reason when they are absent; in CI (``CI`` set) it fails.
* ``pg_url`` / ``db_url`` — PostgreSQL at ``LABELQ_TEST_POSTGRES_URL`` (default the local
  ``test`` database), each test session in its own schema so concurrent runs do not collide.
  ``db_url`` is parametrized over SQLite and PostgreSQL.
* ``redis_url`` — a real Redis at ``LABELQ_TEST_REDIS_URL`` (default db 15; under
  pytest-xdist, db 15 less the worker's number), flushed.

Every test starts with the ``LABELQ_*`` variables cleared (autouse), like starlette's tests.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

IN_CI = bool(os.environ.get("CI"))
POSTGRES_URL = os.environ.get("LABELQ_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _per_worker_redis(url: str) -> str:
    """The suite runs in several pytest-xdist processes (``gw0``, ``gw1``…): each flushes
    and fills a Redis database of its own, the given one less its worker number (15, 14…).
    Set here, at the root conftest's import, so every module reading the variable sees it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    head, _, db = url.rpartition("/")
    if not db.isdigit() or int(db) < int(worker[2:]):
        raise RuntimeError(f"LABELQ_TEST_REDIS_URL {url!r}: name a database number of at "
                           f"least {worker[2:]} (one per pytest-xdist worker, counting down)")
    return f"{head}/{int(db) - int(worker[2:])}"


REDIS_URL = _per_worker_redis(os.environ.get("LABELQ_TEST_REDIS_URL",
                                             "redis://127.0.0.1:6379/15"))
os.environ["LABELQ_TEST_REDIS_URL"] = REDIS_URL


def _unavailable(what: str, why: str):
    if IN_CI:
        pytest.fail(f"{what} is required in CI but unavailable: {why}", pytrace=False)
    pytest.skip(f"{what} unavailable: {why}")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("LABELQ_") and not key.startswith("LABELQ_TEST_") \
                and key != "LABELQ_SHARED":
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    from labelq.datasets import shared_datasets_dir

    d = shared_datasets_dir()
    if d is None:
        _unavailable("../shared/datasets", "folder not found next to the repository")
    return d


@pytest.fixture(scope="session")
def pg_url() -> str:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        engine = sqlalchemy.create_engine(POSTGRES_URL)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except Exception as exc:  # noqa: BLE001 - any connection failure means unavailable
        _unavailable("PostgreSQL", str(exc).splitlines()[0])
    sep = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    """A new, initialised database (as ``labelq init`` leaves it: only ``init`` creates
    one, every other command refuses a missing database)."""
    from labelq.record.db import engine_for, init_schema

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'labelq.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        # a fresh schema content per test: drop all tables of the session schema
        from sqlmodel import SQLModel, create_engine

        import labelq.record.models  # noqa: F401 - registers tables

        engine = create_engine(url)
        SQLModel.metadata.drop_all(engine)
        engine.dispose()
    init_schema(engine_for(url))  # (a new identity, cached for this process's engine)
    return url


@pytest.fixture
def redis_url() -> str:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        _unavailable("Redis", str(exc))
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()
