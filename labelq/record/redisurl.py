"""``redis+sentinel://`` URLs: parsed and checked (no Redis client here: the settings check
the URL with it; :mod:`labelq.live.redis.connect` makes the clients).

``redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]``: the
sentinels (port 26379 unless given), the name of the master they monitor, the database
number (0). The user and password are the master's (and its replicas').
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["SENTINEL_SCHEME", "SENTINEL_PORT", "SentinelURL", "parse_sentinel_url",
           "is_sentinel_url"]

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
_FORM = "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]"
_MASTER = re.compile(r"[A-Za-z0-9._-]{1,100}")
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME + "://")


def parse_sentinel_url(url: str) -> SentinelURL:
    """Parse ``url`` (see the module docstring); :class:`ValueError` names what is wrong."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL ({_FORM})")
    rest = url[len(SENTINEL_SCHEME) + 3:]
    if "?" in rest or "#" in rest:
        raise ValueError(f"takes no query or fragment ({_FORM})")
    where, _, path = rest.partition("/")
    username = password = None
    if "@" in where:
        auth, _, where = where.rpartition("@")
        user, colon, secret = auth.partition(":")
        if not colon:
            raise ValueError(f"the credentials must be [USER]:PASSWORD@ ({_FORM})")
        username, password = unquote(user) or None, unquote(secret) or None
    sentinels: list[tuple[str, int]] = []
    for i, part in enumerate(where.split(","), start=1):
        host, port = _host_port(part, i)
        sentinels.append((host, port))
    if len(set(sentinels)) != len(sentinels):
        raise ValueError("names a sentinel twice")
    parts = path.split("/") if path else []
    if not parts or not parts[0]:
        raise ValueError(f"names no master (the name the sentinels monitor) ({_FORM})")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] == ""):
        raise ValueError(f"has more path than /MASTER/DB ({_FORM})")
    if not _MASTER.fullmatch(parts[0]):
        raise ValueError(f"the master name must be 1 to 100 letters, digits and . _ -, got "
                         f"{parts[0]!r}")
    db = 0
    if len(parts) == 2:
        if not (parts[1].isdigit() and int(parts[1]) < 2**31):
            raise ValueError(f"the database number must be a whole number from 0, got "
                             f"{parts[1]!r}")
        db = int(parts[1])
    return SentinelURL(tuple(sentinels), parts[0], db, username, password)


def _host_port(part: str, i: int) -> tuple[str, int]:
    if not part:
        raise ValueError(f"sentinel {i} names no host ({_FORM})")
    if part.startswith("["):  # [IPv6]:port
        close = part.find("]")
        host, tail = part[:close + 1], part[close + 1:]
        port_text = tail[1:] if tail.startswith(":") else ("" if not tail else None)
    else:
        host, colon, port_text = part.partition(":")
        if not colon:
            port_text = ""
    if not host or not _HOST.fullmatch(host) or port_text is None:
        raise ValueError(f"sentinel {i} is no HOST[:PORT]: {part!r}")
    if port_text == "":
        return host.strip("[]"), SENTINEL_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"sentinel {i} has no valid port (a number from 1 to 65535): "
                         f"{part!r}")
    return host.strip("[]"), int(port_text)
