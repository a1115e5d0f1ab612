"""Bearer tokens.

* An annotator's token is the one ``enroll_worker`` returned; only its sha256 is stored, so
  the lookup hashes the presented token (:func:`labelq.record.projects.worker_by_token`). No or
  an unknown token: 401; a removed worker: 403. A signed-in annotator (worker and project
  rows) is kept per token hash for ``Runtime.signin_max_age`` seconds (1 s), so a busy
  annotator's requests do not each read SQL; a pause or removal takes effect within that
  long, as in the service's own worker cache. Unknown tokens are not kept. A worker acts
  only on its own assignments — the service checks each assignment's owner (403
  otherwise).
* The operator token is ``LABELQ_OPERATOR_TOKEN``. Unset: operator endpoints answer 503
  ``operator_disabled``; wrong: 403.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ..errors import Forbidden
from ..record.db import session_scope
from ..record.models import Project, Worker
from ..record.projects import hash_token, worker_by_token
from .errors import OperatorDisabled, Unauthorized

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Engine

__all__ = ["Annotator", "current_annotator", "require_operator", "sign_in"]

_annotator_scheme = HTTPBearer(auto_error=False, scheme_name="AnnotatorToken",
                               description="The token `labelq workers enroll` printed.")
_operator_scheme = HTTPBearer(auto_error=False, scheme_name="OperatorToken",
                              description="The value of LABELQ_OPERATOR_TOKEN.")


class Runtime(Protocol):
    """What signing in reads of the app's :class:`~.runtime.Runtime` (said here, so that this
    module, which the runtime names, does not import it back)."""

    engine: Engine
    signins: dict[str, tuple[float, Annotator]]
    signin_max_age: float


@dataclass(frozen=True)
class Annotator:
    """The signed-in worker and its project (a snapshot taken for this request)."""

    worker: Worker
    project: Project

    @property
    def handle(self) -> str:
        return self.worker.handle


async def current_annotator(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(
        _annotator_scheme)) -> Annotator:
    """``async``: a signed-in annotator (the common case) is found in ``Runtime.signins``
    on the event loop, without a hop into the thread pool; only a sign-in reads SQL, and
    that runs in the thread pool."""
    if creds is None or not creds.credentials:
        raise Unauthorized("sign in: send 'Authorization: Bearer <your token>'")
    rt: Runtime = request.app.state.labelq
    key = hash_token(creds.credentials)
    hit = rt.signins.get(key)
    if hit is not None and time.monotonic() - hit[0] < rt.signin_max_age:
        who = hit[1]
    else:
        who = await run_in_threadpool(sign_in, rt, creds.credentials, key)
    if who.worker.status == "removed":
        raise Forbidden(f"worker {who.worker.handle!r} has been removed from the project",
                        worker=who.worker.handle)
    return who


def sign_in(rt: Runtime, token: str, key: str) -> Annotator:
    with session_scope(rt.engine) as session:
        worker = worker_by_token(session, token)
        if worker is None:
            raise Unauthorized("unknown token; ask your operator for a valid one")
        project = session.get(Project, worker.project_id)
    assert project is not None  # foreign key
    who = Annotator(worker, project)
    if len(rt.signins) > 10_000:  # many tokens seen: start afresh rather than grow
        rt.signins.clear()
    rt.signins[key] = (time.monotonic(), who)
    return who


def require_operator(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(
        _operator_scheme)) -> None:
    expected = request.app.state.labelq.settings.operator_token
    if not expected:
        raise OperatorDisabled("operator endpoints are disabled: set LABELQ_OPERATOR_TOKEN "
                               "on the server to enable them")
    if creds is None or not creds.credentials:
        raise Unauthorized("operator endpoints need 'Authorization: Bearer <operator token>'")
    if not hmac.compare_digest(_digest(creds.credentials), _digest(expected)):
        raise Forbidden("wrong operator token")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
