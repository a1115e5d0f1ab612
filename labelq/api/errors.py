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
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import LabelqError, ServiceUnavailable

__all__ = ["Unauthorized", "OperatorDisabled", "PayloadTooLarge", "ErrorBody",
           "install_error_handlers", "error_response", "ERROR_RESPONSES"]

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


def _labelq_error(_request: Request, exc: LabelqError) -> JSONResponse:
    status = exc.http_status
    if status >= 500 and not isinstance(exc, ServiceUnavailable):
        log.error("labelq error answered with %s: %s", status, exc, exc_info=exc)
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


def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    if _is_unavailable(exc):
        log.warning("backing service unavailable: %s", exc)
        return error_response(503, {"code": "service_unavailable",
                                    "message": "Redis or the database does not answer; "
                                               "try again shortly"})
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, {"code": "internal_error",
                                "message": "internal server error (see the server log)"})


def _is_unavailable(exc: BaseException) -> bool:
    import redis
    from sqlalchemy.exc import OperationalError

    return isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OperationalError))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(LabelqError, _labelq_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
