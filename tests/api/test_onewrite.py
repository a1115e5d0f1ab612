"""labelq.api.onewrite: a hot-path answer (its start message marked ONE_WRITE) reaches the
socket in one write, headers and body together; any other answer is uvicorn's own (two
writes). Driven through uvicorn's httptools protocol with a recording transport."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("httptools")

from uvicorn.config import Config  # noqa: E402
from uvicorn.protocols.http import httptools_impl  # noqa: E402
from uvicorn.server import ServerState  # noqa: E402

from labelq.api.onewrite import ONE_WRITE, install  # noqa: E402


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_extra_info(self, name: str, default=None):
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5000)}.get(
            name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_protocol(self, protocol) -> None:
        pass


async def _app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    body = b'{"ok":true}'
    start = {"type": "http.response.start", "status": 200,
             "headers": [(b"content-length", str(len(body)).encode()),
                         (b"content-type", b"application/json")]}
    if scope["path"] == "/hot":
        start[ONE_WRITE] = True
    await send(start)
    await send({"type": "http.response.body", "body": body})


def _writes(path: str) -> list[bytes]:
    async def run() -> list[bytes]:
        config = Config(app=_app, http="httptools", lifespan="off", access_log=False)
        config.load()
        protocol = httptools_impl.HttpToolsProtocol(config, ServerState(), {})
        transport = _Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.data_received(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        for _ in range(50):
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        return transport.writes
    return asyncio.run(run())


def test_a_marked_answer_is_one_write_and_others_are_unchanged():
    # Given the one-write cycle installed in uvicorn's httptools protocol
    assert install()
    # When the application answers with a marked start, and with a plain one
    hot, plain = _writes("/hot"), _writes("/plain")
    # Then the marked answer is one write holding the headers and the body
    assert len(hot) == 1 and hot[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert hot[0].endswith(b'\r\n\r\n{"ok":true}') and b"content-length: 11\r\n" in hot[0]
    # and the plain one is uvicorn's two writes, with the same bytes (but the date)
    assert len(plain) == 2 and plain[1] == b'{"ok":true}'
    assert _dateless(b"".join(plain)) == _dateless(hot[0])


def _dateless(response: bytes) -> list[bytes]:
    return [line for line in response.split(b"\r\n") if not line.startswith(b"date: ")]
