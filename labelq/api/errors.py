"""Every error the API answers with is JSON ``{"code": ..., "message": ..., ...context}``.

::

    labelq.errors.LabelqError        its own ``http_status`` and ``code`` (to_dict())
    ├── Unauthorized                 401 unauthorized       no or unknown bearer token
    ├── OperatorDisabled             503 operator_disabled  LABELQ_OPERATOR_TOKEN unset
    └── PayloadTooLarge              413 payload_too_large  body over the limit
    RequestValidationError           422 validation_error   body/path/query malformed
    starlette HTTPException          its status; not_found, method_not_allowed, http_error
    redis / SQL connection errors    503 service_unavailable
    anything else                    500 internal_error (details only in the server log)

An outage of Redis or the database is logged once, when the first request meets it, and
again when requests succeed ("... is back", :class:`OutageLog`) — not a traceback per
request. Its 503s are answered by exception handlers of their own (Starlette's handler for
``Exception`` re-raises after answering, so the server logged a traceback and closed the
keep-alive connection). A submit's 503 says whether the label was recorded (``recorded``:
true, false, or null when unknown) and that sending it again is safe (``retry_safe``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import LabelqError, ServiceUnavailable
from ..service import UNAVAILABLE

__all__ = ["Unauthorized", "OperatorDisabled", "PayloadTooLarge", "ErrorBody",
           "install_error_handlers", "answer_exception", "error_response", "ERROR_RESPONSES", "OutageLog"]

log = logging.getLogger("labelq.api")


class Unauthorized(LabelqError):
    http_status = 401
    code = "unauthorized"


class OperatorDisabled(ServiceUnavailable):
    code = "operator_disabled"


class PayloadTooLarge(LabelqError):
    http_status = 413
    code = "payload_too_large"


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}



class ErrorBody(BaseModel):
    """A machine-readable ``code``, a sentence for people, and context fields."""

    model_config = ConfigDict(extra="allow")
    code: str
    message: str


def _resp(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _resp("The body could not be read, e.g. not UTF-8 (code `bad_request`)."),
    401: _resp("No or unknown bearer token (code `unauthorized`)."),
    403: _resp("Not yours, or your account is paused (code `forbidden`)."),
    413: _resp("Request body too large (code `payload_too_large`)."),
    422: _resp("Malformed request (`validation_error`) or invalid value (`invalid_input`)."),
    503: _resp("Redis or the database does not answer (`service_unavailable`)."),
}


def error_response(status: int, body: dict[str, Any],
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


class OutageLog:
    """Logs an outage of Redis or the database once: a warning at the first request that
    meets it, then one when a request succeeds again (with how long it lasted and how many
    requests were answered 503 meanwhile). Cheap when there is no outage: the middleware
    of :func:`install_error_handlers` looks at one attribute per request."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.failed = 0
        self._lock = threading.Lock()

    def down(self, exc: BaseException) -> None:
        with self._lock:
            self.failed += 1
            if self.since is not None:
                return
            self.since = time.monotonic()
        log.warning("Redis or the database does not answer (%s: %s); answering 503 until "
                    "it is back", type(exc).__name__, exc)

    def up(self) -> None:
        with self._lock:
            if self.since is None:
                return
            took, failed = time.monotonic() - self.since, self.failed
            self.since, self.failed = None, 0
        log.warning("Redis and the database answer again, after %.1f s (%d requests "
                    "answered 503)", took, failed)


class _OutageWatch:
    """ASGI middleware: during an outage, a response below 500 means it is over."""

    def __init__(self, app: ASGIApp, outage: OutageLog) -> None:
        self.app, self.outage = app, outage

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.outage.since is None:
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)
        await self.app(scope, receive, watch)
        if status and status[0] < 500:
            self.outage.up()


def _labelq_error(request: Request, exc: LabelqError) -> JSONResponse:
    status = exc.http_status
    if status >= 500 and not isinstance(exc, ServiceUnavailable):
        log.error("labelq error answered with %s: %s", status, exc, exc_info=exc)
    if isinstance(exc, ServiceUnavailable) and exc.__cause__ is not None:
        request.app.state.outage.down(exc.__cause__)
    headers = {"WWW-Authenticate": 'Bearer realm="labelq"'} if status == 401 else None
    return error_response(status, exc.to_dict(), headers)


def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
               "type": str(e.get("type", ""))} for e in exc.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(first["loc"][1:] or first["loc"]) or "request"
    return error_response(422, {"code": "validation_error",
                                "message": f"{where}: {first['msg']}", "errors": errors})


def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return error_response(exc.status_code, {"code": code, "message": message},
                          getattr(exc, "headers", None))


def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    request.app.state.outage.down(exc)
    return error_response(503, {"code": "service_unavailable",
                                "message": "Redis or the database does not answer; "
                                           "try again shortly"})


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    if _is_unavailable(exc):  # raised where the handlers above do not reach
        return _unavailable(request, exc)
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, {"code": "internal_error",
                                "message": "internal server error (see the server log)"})


def _is_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, UNAVAILABLE)


def answer_exception(request: Request, exc: Exception) -> JSONResponse:
    """The answer the handlers :func:`install_error_handlers` registers give to ``exc``
    (for code that runs outside the application's exception middleware, such as
    :class:`~labelq.api.fastpath.HotPath`)."""
    for cls in type(exc).__mro__:
        if cls in UNAVAILABLE:
            return _unavailable(request, exc)
        if cls is LabelqError:
            return _labelq_error(request, exc)  # type: ignore[arg-type]
    return _unexpected(request, exc)


def install_error_handlers(app: FastAPI) -> None:
    app.state.outage = OutageLog()
    app.add_middleware(_OutageWatch, outage=app.state.outage)
    for kind in UNAVAILABLE:
        app.add_exception_handler(kind, _unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(LabelqError, _labelq_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
