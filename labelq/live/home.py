"""A database that knows it is a copy (issue 45).

A database's identity ``D`` (``labelq_database.uid``) names its Redis keys, and a copy of the
database (a backup restored beside the original, a test copy, ``pg_dump`` into another
database) has the same ``D``: acting on the same Redis it would share the original's hot
state (``project delete`` on the copy deleted the original's; a ``rebuild`` there reset the
counters, and the original then recorded 13 labels on a budget of 10).

So the identity has a home: ``lq:{D}:home`` (:func:`labelq.live.redis.keys.home_key`) holds
where the database lives (:class:`labelq.record.db.DatabaseHome`: its location and the
creation nonce kept beside ``D`` in SQL). The first process to use ``D`` on a Redis claims it
(``SET NX``); every process that touches the hot state checks it once (:func:`claim_home`:
the ``Service``, the ``Applier``, ``rebuild_project`` and the commands that write keys), and
one whose database is not the home is refused with :class:`DatabaseCopy` (exit code 9),
naming both places, before it reads or writes a key:

* the home's SQLite file still holds this identity (same uid and nonce): a **copy**, which
  ``labelq init --new-identity`` makes a database of its own (new uid and nonce, its hot
  state rebuilt from its SQL under the new keys; the original's are left alone);
* otherwise (the home's file is gone or holds something else, or the home is a PostgreSQL
  database this process cannot look into): a copy, or the database **moved**; ``labelq init
  --claim`` makes this place the identity's home (a move: the hot state is kept), or
  ``--new-identity`` (a copy);
* another nonce under the same uid: another database with this identity; ``--new-identity``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from ..errors import ServiceUnavailable
from ..record.db import DatabaseHome, database_home
from .redis.keys import home_key

__all__ = ["DatabaseCopy", "claim_home", "home_status", "set_home", "HomeStatus"]


class DatabaseCopy(ServiceUnavailable):
    """This database's identity has its home elsewhere: a copy (or a moved database) is
    refused until ``labelq init --new-identity`` (or ``--claim``)."""

    code = "database_copy"


# (engine, uid, Redis target) already checked by this process: one GET per process
_checked: set[tuple[int, str, str]] = set()
_lock = threading.Lock()


def _target(redis: Any) -> str:
    kwargs = getattr(getattr(redis, "connection_pool", None), "connection_kwargs", {})
    return f"{kwargs.get('host')}:{kwargs.get('port')}/{kwargs.get('db')}:" \
           f"{kwargs.get('path')}:{id(redis) if not kwargs else ''}"


def _value(home: DatabaseHome) -> str:
    return json.dumps({"location": home.location, "nonce": home.nonce, "shown": home.shown,
                       "path": home.path}, sort_keys=True)


def _read(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class HomeStatus:
    """What ``lq:{D}:home`` says of this database: ``state`` is ``"home"`` (this database
    is the identity's home), ``"unclaimed"`` (no process has used it on this Redis yet),
    ``"copy"``, ``"moved"`` (maybe: the home's file no longer holds this identity) or
    ``"other"`` (another creation under the same uid); ``message`` says it to a user."""

    def __init__(self, state: str, home: DatabaseHome, claimed: dict[str, Any]) -> None:
        self.state, self.home, self.claimed = state, home, claimed

    @property
    def elsewhere(self) -> str:
        return str(self.claimed.get("shown") or self.claimed.get("location") or "?")

    @property
    def message(self) -> str:
        h, there = self.home, self.elsewhere
        if self.state == "home":
            return f"this database ({h.shown}) is the home of identity {h.uid}"
        if self.state == "unclaimed":
            return (f"identity {h.uid} is not claimed on this Redis yet (the first process "
                    f"to use it claims it for {h.shown})")
        head = f"this database ({h.shown}) has identity {h.uid}, whose home on this Redis is "
        if self.state == "copy":
            return (head + f"{there}, which still holds it: this database is a copy of that "
                    "one and may not touch its hot state; run `labelq init --new-identity` "
                    "here to make it a database of its own (its hot state is rebuilt from "
                    "its SQL under the new identity; the original's is left alone)")
        if self.state == "moved":
            return (head + f"{there}, which no longer holds it, or cannot be looked into "
                    "from here: if this database was moved from there (the old one is not "
                    "used any more), run `labelq init --claim` here to make this its home; "
                    "if it is a copy, run `labelq init --new-identity` here to give it its own")
        return (head + f"{there}, another database made with the same identity (another "
                "creation nonce): run `labelq init --new-identity` here to give this one its "
                "own")


def _state(home: DatabaseHome, claimed: dict[str, Any]) -> str:
    if claimed.get("location") == home.location and claimed.get("nonce") == home.nonce:
        return "home"
    if claimed.get("nonce") != home.nonce:
        return "other"
    path = claimed.get("path")
    if isinstance(path, str) and _holds(path, home):
        return "copy"
    return "moved"


def _holds(path: str, home: DatabaseHome) -> bool:
    """Whether the SQLite file at ``path`` holds ``home``'s identity (read only)."""
    import sqlite3
    if not Path(path).is_file():
        return False
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT uid, nonce FROM labelq_database WHERE id = 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return row is not None and tuple(row) == (home.uid, home.nonce)


def home_status(engine: Engine, redis: Any) -> HomeStatus:
    """What the identity's home on ``redis`` says of ``engine``'s database (reads only:
    ``labelq check``)."""
    home = database_home(engine)
    raw = redis.get(home_key(home.uid))
    if raw is None:
        return HomeStatus("unclaimed", home, {})
    claimed = _read(raw)
    return HomeStatus(_state(home, claimed), home, claimed)


def claim_home(engine: Engine, redis: Any) -> str:
    """The identity of ``engine``'s database, once this process has made sure it is the
    identity's home on ``redis`` (claiming it if no one has): else :class:`DatabaseCopy`,
    before any key is read or written. Checked once per process, engine and Redis."""
    home = database_home(engine)
    mark = (id(engine), home.uid, _target(redis))
    if mark in _checked:
        return home.uid
    key = home_key(home.uid)
    from redis.exceptions import RedisError
    try:
        status = None
        if not redis.set(key, _value(home), nx=True):
            status = home_status(engine, redis)
            if status.state == "unclaimed":  # (deleted in between: claim it now)
                redis.set(key, _value(home), nx=True)
                status = home_status(engine, redis)
    except RedisError as exc:
        raise ServiceUnavailable(f"Redis does not answer ({exc}): the home of database "
                                 f"identity {home.uid} cannot be checked",
                                 database=home.shown) from exc
    if status is not None and status.state != "home":
        raise DatabaseCopy(status.message, database=home.shown, home=status.elsewhere,
                           identity=home.uid)
    with _lock:
        _checked.add(mark)
    return home.uid


def set_home(engine: Engine, redis: Any) -> DatabaseHome:
    """Make ``engine``'s database the home of its identity on ``redis`` (``labelq init
    --claim``, and after ``--new-identity``), whatever was claimed before."""
    home = database_home(engine)
    redis.set(home_key(home.uid), _value(home))
    with _lock:
        _checked.add((id(engine), home.uid, _target(redis)))
    return home
