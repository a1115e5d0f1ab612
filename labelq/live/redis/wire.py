"""The wire client of the Lua scripts: loading them once per client, and sending many
script calls in one round trip (:class:`ScriptPipeline`)."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from redis import Redis
from redis.connection import ConnectionPool
from redis.exceptions import NoScriptError, ResponseError

hiredis: Any
try:  # packs commands in C (a dependency; redis-py's encoder if it is missing)
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None

__all__ = ["load_script", "ScriptPipeline", "text"]


# the scripts loaded per client: a Scripts, a lock or a reaper pass made again on the same
# client costs a dict lookup, not a SCRIPT LOAD round trip per script
_loaded: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def load_script(redis: Any, source: str) -> Any:
    """``register_script`` plus a ``SCRIPT LOAD``, once per client and script, so the first
    EVALSHA never meets NOSCRIPT: redis-py recovers from that on a real server, but the
    embedded server of ``labelq demo`` (fakeredis over TCP) answers it by closing the
    connection. A server that lost its scripts later (a restart, ``SCRIPT FLUSH``) is
    handled where scripts run: ``Script.__call__`` reloads, and :class:`ScriptPipeline`
    reruns a call that met NOSCRIPT through it."""
    per_client = _loaded.get(redis)
    if per_client is None:
        per_client = _loaded[redis] = {}
    script = per_client.get(source)
    if script is None:
        script = redis.register_script(source)
        redis.script_load(source)
        per_client[source] = script
    return script


def text(v: Any) -> str:
    """A reply (bytes or str) as str."""
    return v.decode() if isinstance(v, bytes) else str(v)


class ScriptPipeline:
    """Script calls sent in one round trip as plain ``EVALSHA`` (the scripts were loaded
    when :class:`Scripts` was made). redis-py's own pipeline would first ask ``SCRIPT
    EXISTS`` on every execute — a second round trip. A call that meets ``NOSCRIPT`` (the
    server lost its script cache) did not run; it is run again alone, through the
    ``Script`` object, which loads the script first.

    On a plain ``redis.Redis`` client the calls go straight over one pooled connection
    (pack, send, read each reply): redis-py's ``Pipeline`` object, its retry wrapper and
    its per-command hooks cost about as much CPU as the rest of a submit. A connection
    error is raised, not retried — a script may have run — and that connection closed.
    Other clients (fakeredis in unit tests) take redis-py's pipeline."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._calls: list[tuple[Any, list[Any], list[Any]]] = []

    def add(self, script: Any, keys: list[Any], args: list[Any]) -> None:
        self._calls.append((script, keys, args))

    def execute(self) -> list[Any]:
        if not self._calls:
            return []
        outs = self._send()
        for i, (out, (script, keys, args)) in enumerate(zip(outs, self._calls, strict=True)):
            if isinstance(out, NoScriptError):
                outs[i] = script(keys=keys, args=args)
            elif isinstance(out, Exception):
                raise out
        return outs

    def _send(self) -> list[Any]:
        cmds = [("EVALSHA", script.sha, len(keys), *keys, *args)
                for script, keys, args in self._calls]
        pool = getattr(self._redis, "connection_pool", None)
        if type(self._redis) is not Redis or type(pool) is not ConnectionPool:
            pipe = self._redis.pipeline(transaction=False)
            for cmd in cmds:
                pipe.execute_command(*cmd)
            replies: list[Any] = pipe.execute(raise_on_error=False)
            return replies
        conns = _conns_of(pool)
        conn = conns.get()
        try:
            conn.send_packed_command(_pack(conn, cmds))
            outs: list[Any] = []
            for _ in cmds:
                try:
                    outs.append(conn.read_response())
                except ResponseError as exc:  # this reply only; the next ones follow
                    outs.append(exc)
            return outs
        except BaseException:
            conn.disconnect()
            raise
        finally:
            conns.put(conn)


class _Connections:
    """Connections a pool lent for script pipelines, kept idle here between uses: taking
    one back and returning it is a list pop and append, where the pool's own
    ``get_connection``/``release`` (locks, fork checks, metrics hooks) cost about as much
    as packing and sending the commands. Before reuse an idle connection is checked the
    way the pool checks one (nothing readable: no stale data, not closed by the server —
    a Redis restart) and reconnected if not. Forgotten after a fork."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.pid = os.getpid()
        self.idle: list[Any] = []

    def get(self) -> Any:
        if self.pid != os.getpid():
            self.pid, self.idle = os.getpid(), []
        try:
            conn = self.idle.pop()
        except IndexError:
            return self.pool.get_connection()  # lent for good
        try:
            stale = conn.can_read()
        except Exception:  # noqa: BLE001 - a broken socket: reconnect below
            stale = True
        if stale:
            conn.disconnect()
            conn.connect()
        return conn

    def put(self, conn: Any) -> None:
        if self.pid == os.getpid():
            self.idle.append(conn)


_connections: weakref.WeakKeyDictionary[Any, _Connections] = weakref.WeakKeyDictionary()
_connections_lock = threading.Lock()


def _conns_of(pool: Any) -> _Connections:
    got = _connections.get(pool)
    if got is None:
        with _connections_lock:
            got = _connections.get(pool)
            if got is None:
                got = _connections[pool] = _Connections(pool)
    return got


def _pack(conn: Any, cmds: list[tuple[Any, ...]]) -> list[Any]:
    """The commands in the wire format, as chunks for ``send_packed_command``: hiredis packs
    a tuple of str/bytes/int in C; other arguments (numpy integers, say) go through
    redis-py's encoder."""
    if hiredis is not None:
        try:
            return [b"".join([hiredis.pack_command(cmd) for cmd in cmds])]
        except TypeError:
            pass
    packed: list[Any] = conn.pack_commands(cmds)
    return packed
