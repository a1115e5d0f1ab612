"""Bearer tokens.

* An annotator's token is the one ``enroll_worker`` returned; only its sha256 is stored, so
  the lookup hashes the presented token (:func:`labelq.projects.worker_by_token`). No or an
  unknown token: 401; a removed worker: 403. A worker acts only on its own assignments —
  the service checks each assignment's owner (403 otherwise).
* The operator token is ``LABELQ_OPERATOR_TOKEN``. Unset: operator endpoints answer 503
  ``operator_disabled``; wrong: 403.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..db import session_scope
from ..errors import Forbidden
from ..models import Project, Worker
from ..projects import worker_by_token
from .errors import OperatorDisabled, Unauthorized

__all__ = ["Annotator", "current_annotator", "require_operator"]

_annotator_scheme = HTTPBearer(auto_error=False, scheme_name="AnnotatorToken",
                               description="The token `labelq workers enroll` printed.")
_operator_scheme = HTTPBearer(auto_error=False, scheme_name="OperatorToken",
                              description="The value of LABELQ_OPERATOR_TOKEN.")


@dataclass(frozen=True)
class Annotator:
    """The signed-in worker and its project (a snapshot taken for this request)."""

    worker: Worker
    project: Project

    @property
    def handle(self) -> str:
        return self.worker.handle


def current_annotator(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(
        _annotator_scheme)) -> Annotator:
    if creds is None or not creds.credentials:
        raise Unauthorized("sign in: send 'Authorization: Bearer <your token>'")
    engine = request.app.state.labelq.engine
    with session_scope(engine) as session:
        worker = worker_by_token(session, creds.credentials)
        if worker is None:
            raise Unauthorized("unknown token; ask your operator for a valid one")
        project = session.get(Project, worker.project_id)
    if worker.status == "removed":
        raise Forbidden(f"worker {worker.handle!r} has been removed from the project",
                        worker=worker.handle)
    assert project is not None  # foreign key
    return Annotator(worker, project)


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
