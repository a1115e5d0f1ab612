"""A Redis lock with a token: ``SET key token NX PX ttl``; extend and release check the
token in Lua (``lua/lock_release.lua``, ``lua/lock_extend.lua``), so a holder whose lock
already expired can never delete or extend the lock of the next holder (the race a plain
GET-then-DEL would have)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from .scripts import lua_source
from .wire import load_script

__all__ = ["RedisLock"]


def _scripts(redis: Any) -> tuple[Any, Any]:
    """The two scripts, loaded once per client (a lock is made per applier run)."""
    return (load_script(redis, lua_source("lock_release")),
            load_script(redis, lua_source("lock_extend")))


class RedisLock:
    def __init__(self, redis: Any, key: str, ttl_ms: int = 30_000) -> None:
        self.redis, self.key, self.ttl_ms = redis, key, int(ttl_ms)
        self.token = secrets.token_hex(16)
        self._release, self._extend = _scripts(redis)
        self.held = False

    def acquire(self) -> bool:
        self.held = bool(self.redis.set(self.key, self.token, nx=True, px=self.ttl_ms))
        return self.held

    def acquire_within(self, wait_s: float, poll_s: float = 0.05) -> bool:
        """Try until acquired or ``wait_s`` has passed (polling every ``poll_s``)."""
        deadline = time.monotonic() + wait_s
        while not self.acquire():
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)
        return True

    def extend(self) -> bool:
        """Push the expiry out again; False means the lock was lost (stop writing)."""
        self.held = bool(int(self._extend(keys=[self.key], args=[self.token, self.ttl_ms])))
        return self.held

    def release(self) -> None:
        if self.held:
            self._release(keys=[self.key], args=[self.token])
            self.held = False
