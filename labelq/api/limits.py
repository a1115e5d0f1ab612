"""The request body limit: bodies over ``max_bytes`` are answered 413 before any route runs.

A pure ASGI middleware. A declared ``Content-Length`` over the limit is refused at once;
otherwise the body is read (up to the limit, so a chunked upload cannot grow without bound)
and replayed to the application.

A route that takes a file (``POST /api/v1/projects/{name}/predictions``) has a larger
limit of its own (``larger``: a path pattern and its limit): its body is not held here but
passed on as it arrives, counted, and a body that goes over the limit raises
:class:`~.errors.PayloadTooLarge` (413) in the route reading it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .errors import PayloadTooLarge

__all__ = ["BodyLimit", "DEFAULT_MAX_BODY"]

DEFAULT_MAX_BODY = 64 * 1024

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int = DEFAULT_MAX_BODY,
                 larger: Sequence[tuple[str, int]] = ()) -> None:
        self.app, self.max_bytes = app, max_bytes
        self.larger = [(re.compile(pattern), limit) for pattern, limit in larger]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = next((n for pattern, n in self.larger if pattern.fullmatch(scope["path"])),
                     None)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _answer(send, 400, "bad_request", "Content-Length is not a number")
                return
            bound = self.max_bytes if limit is None else limit
            if length > bound:
                await _answer(send, 413, "payload_too_large", _too_large(bound))
                return
        if limit is not None:
            await self.app(scope, _counted(receive, limit), send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await _answer(send, 413, "payload_too_large", _too_large(self.max_bytes))
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)



def _too_large(limit: int) -> str:
    return f"request body over the limit of {limit} bytes"


def _counted(receive: Receive, limit: int) -> Receive:
    """``receive``, raising :class:`PayloadTooLarge` once the body passes ``limit``."""
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            if size > limit:
                raise PayloadTooLarge(_too_large(limit), limit=limit)
        return message

    return counted


async def _answer(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"code": code, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
