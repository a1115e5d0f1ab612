"""A fast path for the two requests an annotator's client makes per label.

``POST /api/v1/assignments/next`` and ``POST /api/v1/assignments/{id}/label`` are most of
the API's traffic. :class:`HotPath` (pure ASGI middleware) answers them without Starlette's
routing and FastAPI's dependency solving, but only when the request is plainly well-formed
and the annotator is already signed in (a fresh entry of ``Runtime.signins``):

* the path is exactly one of the two, the method POST, the query empty or ``next=true`` /
  ``next=false`` (the label endpoint);
* ``Authorization: Bearer <token>`` with a cached, not removed, annotator;
* the label's body is ``application/json`` and exactly ``{"label": <text>}`` that
  :class:`~labelq.api.schemas.SubmitIn` accepts (1–200 printable characters);
* no outage is being watched (``app.state.outage``).

Anything else goes to the FastAPI application unchanged (the body replayed), which
validates, signs in and answers errors as before, so every answer but the happy one is the
application's own. The work is the same functions the FastAPI endpoints call
(:mod:`.annotator`), in one thread-pool call; an error the service raises is answered by
the application's exception handlers (:func:`.errors.answer_exception`).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..projects import hash_token
from .annotator import next_body, submit_body
from .errors import answer_exception

__all__ = ["HotPath"]

_NEXT = "/api/v1/assignments/next"
_LABEL = re.compile(r"/api/v1/assignments/([A-Za-z0-9_-]{1,64})/label")
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
_QUERY = {b"": False, b"next=false": False, b"next=true": True}


class HotPath:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == _NEXT:
            aid = None
        else:
            m = _LABEL.fullmatch(path) if path.endswith("/label") else None
            if m is None:
                await self.app(scope, receive, send)
                return
            aid = m.group(1)
        then_next = _QUERY.get(scope["query_string"])
        app = scope.get("app")
        who = self._signed_in(scope, app) if then_next is not None and app else None
        if who is None:
            await self.app(scope, receive, send)
            return
        body = b""
        if aid is not None:  # read the body (BodyLimit, outside, has already bounded it)
            chunks = []
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)
            label = _label(scope, body)
            if label is None:
                await self.app(scope, _replay(body, receive), send)
                return
        service = app.state.labelq.service
        try:
            if aid is None:
                out = await run_in_threadpool(next_body, service, who)
            else:
                out = await run_in_threadpool(submit_body, service, who, aid, label,
                                              then_next)
        except Exception as exc:  # noqa: BLE001 - answered as the application would
            await answer_exception(Request(scope), exc)(scope, receive, send)
            return
        data = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(data)).encode()),
                                (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})

    @staticmethod
    def _signed_in(scope, app) -> Any:
        if app.state.outage.since is not None:
            return None
        auth = _one_header(scope, b"authorization")
        if auth is None or not auth.startswith(b"Bearer ") or b" " in auth[7:] \
                or len(auth) == 7:
            return None
        rt = app.state.labelq
        hit = rt.signins.get(hash_token(auth[7:].decode("latin-1")))
        if hit is None or time.monotonic() - hit[0] >= rt.signin_max_age \
                or hit[1].worker.status == "removed":
            return None
        return hit[1]


def _one_header(scope, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case) when it is given exactly once, else None:
    a repeated header is not plainly well-formed (the application decides)."""
    found = None
    for key, value in scope["headers"]:
        if key == name:
            if found is not None:
                return None
            found = value
    return found


def _label(scope, body: bytes) -> str | None:
    """The label of a plainly well-formed body, else None (the application decides)."""
    if _one_header(scope, b"content-type") != b"application/json":
        return None
    try:
        got = json.loads(body)
    except ValueError:
        return None
    if type(got) is not dict or len(got) != 1:
        return None
    label = got.get("label")
    if type(label) is not str or _TEXT.fullmatch(label) is None:
        return None
    return label


def _replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay
