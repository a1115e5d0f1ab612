"""Where a webhook may be delivered: public addresses only, unless the deployment allows
more (``LABELQ_HOOK_ALLOW_NETWORKS``).

A hook's URL is chosen by whoever holds the operator token, and the worker that POSTs to
it sits inside the deployment's network: without a check, a hook at
``http://169.254.169.254/…`` (a cloud's metadata service), ``http://127.0.0.1:6379/`` or
``http://10.0.0.5/admin`` makes labelq's worker a proxy into that network (server-side
request forgery; Label Studio's webhooks had such reports). So every address the host
name resolves to is checked *when the request is made* — not only when the hook is added:
a name can resolve to a public address then and to a private one later (DNS rebinding) —
and the connection goes to an address that was checked, never to a second lookup's.

Refused unless inside one of the allowed networks: every address that is not globally
routable (:attr:`ipaddress.IPv4Address.is_global`: loopback, RFC 1918 private, link-local,
carrier-grade NAT, unique-local IPv6, unspecified, reserved, documentation) and every
multicast address. An IPv6 address that carries an IPv4 address to a gateway or tunnel
(IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated, NAT64 ``64:ff9b::a.b.c.d``, 6to4
``2002:…``, IPv4-compatible ``::a.b.c.d``) is judged as that IPv4 address, and the local-use
NAT64 prefix ``64:ff9b:1::/48`` is refused.
``LABELQ_HOOK_ALLOW_NETWORKS`` (comma-separated CIDR blocks, e.g. ``10.20.0.0/16`` or
``127.0.0.1/32`` for a receiver on the worker's own machine) is read by the edges that
deliver (``labelq run-worker``'s hooks process, ``labelq hooks test``), never from the API:
an operator token cannot widen it.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
from collections.abc import Sequence
from typing import Union
from urllib.parse import urlsplit

from .record.settings import Network, parse_networks

__all__ = ["Network", "parse_networks", "refusal", "resolve", "post", "TOTAL_FACTOR"]

TOTAL_FACTOR = 2.0  # a whole request may take this many times the per-step timeout

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]  # noqa: UP007 - (an alias)


# IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits, for a gateway
# or the host to deliver to (ipaddress' is_global calls every one of them public)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)
_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291's deprecated IPv4-compatible
# RFC 8215's local-use NAT64 prefix: a network's own translator, its IPv4 address anywhere
# in the 80 bits after the prefix (the length is the network's choice): refused whole
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def _plain(ip: Address) -> Address:
    """The IPv4 address ``ip`` reaches when it carries one — IPv4-mapped, IPv4-translated,
    NAT64, 6to4 or IPv4-compatible (a NAT64 gateway of an IPv6-only subnet delivers
    ``64:ff9b::a00:5`` to ``10.0.0.5``) — else ``ip``."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _TRANSLATED or (ip in _COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)  # (:: and ::1 are themselves)
    return ip


def refusal(ip: Address, allowed: Sequence[Network] = ()) -> str | None:
    """Why a webhook may not go to ``ip`` (None: it may)."""
    ip = _plain(ip)
    if any(ip.version == n.version and ip in n for n in allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip in _NAT64_LOCAL:
        return "a local-use NAT64 address"
    if ip.is_multicast:
        return "a multicast address"
    if not ip.is_global:
        kind = ("a loopback" if ip.is_loopback else "a link-local" if ip.is_link_local
                else "a private" if ip.is_private else "a non-public")
        return f"{kind} address"
    return None


def resolve(host: str, port: int, allowed: Sequence[Network] = ()) -> list[str]:
    """The addresses to connect to for ``host``, in the resolver's order, once every one
    it resolves to passed :func:`refusal` (a name with one private address among public
    ones is refused whole: which one a connection ends up on is not ours to know). Raises
    :class:`PermissionError` saying which address and why, OSError when it does not
    resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for *_, sockaddr in infos:
        a = str(sockaddr[0]).split("%", 1)[0]
        if a not in addresses:
            addresses.append(a)
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    for a in addresses:
        ip = ipaddress.ip_address(a)
        why = refusal(ip, allowed)
        if why is not None:
            plain = _plain(ip)  # (the address the allowed networks are matched with)
            raise PermissionError(
                f"{host} resolves to {a}, {why}: webhooks go to public addresses only "
                f"(allow it with LABELQ_HOOK_ALLOW_NETWORKS={plain}/{plain.max_prefixlen} "
                "where the worker runs)")
    return addresses


def _connect(addresses: Sequence[str], port: int, timeout: float | None) -> socket.socket:
    """A connection to the first of ``addresses`` (checked) that accepts one."""
    last: OSError | None = None
    for a in addresses:
        try:
            return socket.create_connection((a, port), timeout)
        except OSError as exc:
            last = exc
    assert last is not None  # (resolve never returns no address)
    raise last


class _Pinned(http.client.HTTPConnection):
    """An HTTP connection to one of ``addresses`` (checked), for the URL's host name."""

    def __init__(self, host: str, port: int, addresses: list[str], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._addresses = addresses

    def connect(self) -> None:
        self.sock = _connect(self._addresses, self.port, self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    """An HTTPS connection to one of ``addresses`` (checked); the certificate is checked
    against the URL's host name, as for any HTTPS request."""

    def __init__(self, host: str, port: int, addresses: list[str], timeout: float) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._addresses = addresses

    def connect(self) -> None:
        raw = _connect(self._addresses, self.port, self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float,
         allowed: Sequence[Network] = ()) -> int:
    """POST ``body`` to ``url`` (http or https, checked already) at an address
    :func:`resolve` allowed; the answer's status (redirects are answers, not followed).
    Raises PermissionError (a refused address) or OSError/HTTPException (no answer)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    tls = parts.scheme.lower() == "https"
    port = parts.port or (443 if tls else 80)
    addresses = resolve(host, port, allowed)
    conn = (_PinnedTLS if tls else _Pinned)(host, port, addresses, timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # ``timeout`` bounds each connect, send and read; a receiver that trickles its answer a
    # byte at a time would never hit it, and hold one of the hooks process' few threads: the
    # whole request is cut at twice that (the socket shut down under the blocked read)
    cut = threading.Event()

    def abort() -> None:
        cut.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    timer = threading.Timer(TOTAL_FACTOR * timeout, abort)
    timer.daemon = True
    timer.start()
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read(1024)
        if cut.is_set():
            raise TimeoutError(f"no whole answer within {TOTAL_FACTOR * timeout:g} s")
        return int(response.status)
    except (OSError, http.client.HTTPException) as exc:
        if cut.is_set():
            raise TimeoutError(f"no whole answer within {TOTAL_FACTOR * timeout:g} s "
                               "(the receiver sent it too slowly)") from exc
        raise
    finally:
        timer.cancel()
        conn.close()
