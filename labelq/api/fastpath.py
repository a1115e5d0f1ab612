"""A fast path for the two requests an annotator's client makes per label.

``POST /api/v1/assignments/next`` and ``POST /api/v1/assignments/{id}/label`` are most of
the API's traffic. :class:`HotPath` is the application's ASGI entry (``create_app``'s
FastAPI subclass offers it every request first, ahead of the middleware stack) and answers
them without Starlette's middleware and routing or FastAPI's dependency solving, but only
when the request is plainly well-formed and the annotator is signed in (an entry of
``Runtime.signins``; one older than ``signin_max_age`` is renewed here, in the thread pool,
as the sign-in dependency would):

* the path is exactly one of the two, the method POST, the query empty or ``next=true`` /
  ``next=false`` (the label endpoint), or those with ``project=NAME`` (a person enrolled in
  several projects naming one: the sign-in of that token and project);
* ``Authorization: Bearer <token>`` of a signed-in, not removed, annotator;
* no ``Transfer-Encoding``; the label's body declares a ``Content-Length`` within the
  body limit (``next``: none or 0), is ``application/json`` and exactly
  ``{"label": <text>}`` that :class:`~labelq.api.schemas.SubmitIn` accepts (1–200
  printable characters);
* no outage is being watched (``app.state.outage``).

Anything else goes to the FastAPI application unchanged (the body replayed), which bounds
the body (:class:`~.limits.BodyLimit`), validates, signs in and answers errors as before,
so every answer but the happy one is the application's own. The work is the service's,
reached as the route reaches it: ``next`` is one thread-pool call
(:func:`.annotator.next_body`); a label is :func:`.annotator.submit_body`, the service's
one way in for a submit (:meth:`~labelq.service.Service.submit_async`: it joins the
committer's next batch — :mod:`.committer`, the group commit in one thread, no thread-pool
hop — and, committed with its next assignment popped in the same batch, is answered on the
event loop; what else it needs — rows to read first, finishing it alone, deciding its next
assignment at once — is one thread-pool call). An error the service raises is answered by
the application's exception handlers (:func:`.errors.answer_exception`).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..record.projects import hash_token
from .annotator import json_bytes, next_body, submit_body
from .auth import Annotator, sign_in, signin_key
from .errors import answer_exception
from .onewrite import ONE_WRITE

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

    from .runtime import Runtime

__all__ = ["HotPath"]

_NEXT = "/api/v1/assignments/next"
_LABEL = re.compile(r"/api/v1/assignments/([A-Za-z0-9_-]{1,64})/label")
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
_QUERY = {b"": False, b"next=false": False, b"next=true": True}
_RENEWING: set[str] = set()  # token hashes whose sign-in is being renewed
_KEYS: dict[bytes, str] = {}  # Authorization header -> its token's hash (Runtime.signins' key)


class HotPath:
    """``app``: the application's own ASGI entry (everything not taken here goes there,
    through its middleware — :class:`~.limits.BodyLimit` among them); ``fastapi``: the
    application (its state, and ``scope["app"]`` of an error answered here); ``max_body``:
    BodyLimit's bound — a body taken here declares a ``Content-Length`` within it."""

    def __init__(self, app: ASGIApp, fastapi: FastAPI, max_body: int) -> None:
        self.app, self.fastapi, self.max_body = app, fastapi, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == _NEXT:
            aid = None
        else:
            m = _LABEL.fullmatch(path) if path.endswith("/label") else None
            if m is None:
                await self.app(scope, receive, send)
                return
            aid = m.group(1)
        then_next = _QUERY.get(scope["query_string"])
        project: str | None = None
        if then_next is None and scope["query_string"]:
            then_next, project = _query(scope["query_string"])
        app = self.fastapi
        who: Annotator | None = None
        if then_next is not None and self._bounded(scope, aid is not None):
            who = await self._signed_in(scope, app, project)
        if who is None:
            await self.app(scope, receive, send)
            return
        scope["app"] = app
        label = None
        if aid is not None:  # read the body (its declared length is within the bound)
            chunks: list[bytes] = []
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
        rt: Runtime = app.state.labelq
        try:
            if aid is None or label is None:
                out = await run_in_threadpool(next_body, rt.service, who)
            else:
                out = await submit_body(rt, who, aid, label, bool(then_next))
        except Exception as exc:  # noqa: BLE001 - answered as the application would
            await answer_exception(Request(scope), exc)(scope, receive, send)
            return
        data = json_bytes(out)
        await send({"type": "http.response.start", "status": 200, ONE_WRITE: True,
                    "headers": [(b"content-length", str(len(data)).encode()),
                                (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})

    def _bounded(self, scope: Scope, has_body: bool) -> bool:
        """Whether the body is plainly bounded: one ``Content-Length`` within the limit
        (``next``: none, or 0), no ``Transfer-Encoding``; else the application (with
        BodyLimit) decides."""
        length = _one_header(scope, b"content-length")
        if any(key == b"transfer-encoding" for key, _ in scope["headers"]):
            return False
        if not has_body:
            return length is None or length == b"0"
        return length is not None and length.isdigit() and int(length) <= self.max_body

    @staticmethod
    async def _signed_in(scope: Scope, app: FastAPI,
                         project: str | None = None) -> Annotator | None:
        """The signed-in annotator, or None (the application decides). A sign-in older
        than ``signin_max_age`` is renewed here, in the thread pool, as the application's
        sign-in dependency would renew it."""
        if app.state.outage.since is not None:
            return None
        auth = _one_header(scope, b"authorization")
        if auth is None or not auth.startswith(b"Bearer ") or b" " in auth[7:] \
                or len(auth) == 7:
            return None
        rt: Runtime = app.state.labelq
        token = auth[7:].decode("latin-1")
        key = _KEYS.get(auth)
        if key is None:  # the token's hash, once per token (a sha256 per request was 2 %)
            if len(_KEYS) > 10_000:
                _KEYS.clear()
            key = _KEYS[auth] = hash_token(token)
        key = signin_key(key, project)
        hit = rt.signins.get(key)
        if hit is None:  # not signed in yet: the application signs in (or answers 401)
            return None
        who: Annotator | None = hit[1]
        age = time.monotonic() - hit[0]
        if age >= rt.signin_max_age:
            who = await run_in_threadpool(_sign_in_again, rt, token, key, project)
        elif age >= rt.signin_max_age / 2 and key not in _RENEWING:
            # renewed in the background, so that a busy annotator's requests find it fresh
            _RENEWING.add(key)
            asyncio.get_running_loop().run_in_executor(None, _renew, rt, token, key, project)
        if who is None or who.worker.status == "removed":
            return None
        return who


def _renew(rt: Runtime, token: str, key: str, project: str | None) -> None:
    try:
        _sign_in_again(rt, token, key, project)
    finally:
        _RENEWING.discard(key)


def _sign_in_again(rt: Runtime, token: str, key: str,
                   project: str | None = None) -> Annotator | None:
    """A renewed sign-in, or None when it fails (the application answers then)."""
    try:
        return sign_in(rt, token, key, project)
    except Exception:  # noqa: BLE001 - unknown token, an outage: the application decides
        return None


def _query(raw: bytes) -> tuple[bool | None, str | None]:
    """(then_next, project) of a query of ``project=NAME`` and at most one ``next=true`` /
    ``next=false``, each once; (None, None) for anything else (the application decides)."""
    from urllib.parse import parse_qsl
    try:
        pairs = parse_qsl(raw.decode("ascii"), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return None, None
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys) or not set(keys) <= {"next", "project"} \
            or "project" not in keys:
        return None, None
    values = dict(pairs)
    project, then_next = values["project"], values.get("next", "false")
    if then_next not in ("true", "false") or not _TEXT.fullmatch(project):
        return None, None
    return then_next == "true", project


def _one_header(scope: Scope, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case) when it is given exactly once, else None:
    a repeated header is not plainly well-formed (the application decides)."""
    found: bytes | None = None
    for key, value in scope["headers"]:
        if key == name:
            if found is not None:
                return None
            found = value
    return found


def _label(scope: Scope, body: bytes) -> str | None:
    """The label of a plainly well-formed body, else None (the application decides)."""
    if _one_header(scope, b"content-type") != b"application/json":
        return None
    try:
        got: Any = orjson.loads(body)
    except orjson.JSONDecodeError:  # (json.loads may take more: the application decides)
        return None
    if type(got) is not dict or len(got) != 1:
        return None
    label = got.get("label")
    if type(label) is not str or _TEXT.fullmatch(label) is None:
        return None
    return label


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay
