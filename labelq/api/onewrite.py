"""One socket write per hot-path answer.

uvicorn writes a response's status line and headers when the application sends
``http.response.start`` and its body on ``http.response.body``: two writes, two TCP
segments, and — with the client waiting on the other core — two wake-ups of its thread,
for an answer of a few hundred bytes. :class:`OneWriteCycle` (uvicorn's httptools request
cycle) holds a start message that :class:`~labelq.api.fastpath.HotPath` marks
(``ONE_WRITE``) until its body follows — the hot path sends both at once — and gives the
two to uvicorn with the connection's writes gathered into one. Every other response is
uvicorn's, unchanged. :func:`install` puts the class in place of uvicorn's (``labelq
serve``); without it (another server, another uvicorn protocol) the mark is ignored.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover - uvicorn is imported only by install()
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

__all__ = ["ONE_WRITE", "install"]

ONE_WRITE = "labelq.one_write"


class _Gather:
    """A transport that keeps what is written until :meth:`flush`."""

    __slots__ = ("real", "chunks")

    def __init__(self, real: asyncio.Transport) -> None:
        self.real = real
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def flush(self) -> None:
        if self.chunks:
            self.real.write(b"".join(self.chunks))
            self.chunks = []

    def close(self) -> None:
        self.flush()
        self.real.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _cycle_class() -> type[RequestResponseCycle]:
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    class OneWriteCycle(RequestResponseCycle):
        _labelq_one_write = True  # install() puts it in place once
        # the start message held until its body: an ASGI send event (uvicorn types these
        # as a union of TypedDicts, which the ONE_WRITE key is not part of)
        _held: Any = None

        async def send(self, message: Any) -> None:
            held = self._held
            if held is None:
                if message["type"] == "http.response.start" and message.get(ONE_WRITE) \
                        and not self.response_started:
                    self._held = message
                    return
                await super().send(message)
                return
            self._held = None
            real = self.transport
            gather = _Gather(real)
            # _Gather stands in for the transport: it keeps writes, delegates the rest
            self.transport = cast(asyncio.Transport, gather)
            try:
                await super().send(held)
                await super().send(message)
            finally:
                self.transport = real
                gather.flush()
    return OneWriteCycle


def install() -> bool:
    """Make uvicorn's httptools protocol use :class:`OneWriteCycle`; False when uvicorn's
    module is not as expected (nothing is changed then)."""
    try:
        from uvicorn.protocols.http import httptools_impl
    except ImportError:
        return False
    base = getattr(httptools_impl, "RequestResponseCycle", None)
    if base is None or getattr(base, "_labelq_one_write", False):
        return base is not None
    # (setattr: replacing uvicorn's class is the point, which a plain assignment to a class
    # name does not say to a type checker)
    setattr(httptools_impl, "RequestResponseCycle", _cycle_class())
    return True

