"""Bearer tokens.

* An annotator's token is the one ``enroll_worker`` returned; only its sha256 is stored, so
  the lookup hashes the presented token (:func:`labelq.record.projects.worker_by_token`). No or
  an unknown token: 401; a removed worker: 403. A signed-in annotator (worker and project
  rows) is kept per token hash for ``Runtime.signin_max_age`` seconds (1 s), so a busy
  annotator's requests do not each read SQL; a pause or removal takes effect within that
  long, as in the service's own worker cache. Unknown tokens are not kept. A worker acts
  only on its own assignments — the service checks each assignment's owner (403
  otherwise).
* A token is a person's (issue 43): one person enrolled in several projects signs in to
  each with it. Which enrolment a request works in: the project its ``?project=NAME``
  names, else their only one, else their default (``labelq workers default``), else the
  request is refused (422, naming the projects; ``GET /me/projects`` lists them). Sign-ins
  are kept per token and project asked for.
* The operator token is ``LABELQ_OPERATOR_TOKEN``. Unset: operator endpoints answer 503
  ``operator_disabled``; wrong: 403.
* The review page's endpoints (``/review/api``) take the operator token or a reviewer's
  (``labelq reviewers add``; stored hashed, looked up on every request: a removed reviewer
  is refused at once); anything else: 401. A reviewer token opens nothing else.
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
from ..record.projects import choose_enrolment, hash_token, workers_by_token
from .errors import OperatorDisabled, Unauthorized

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Engine

__all__ = ["Annotator", "current_annotator", "current_person", "Person", "require_operator",
           "sign_in", "signin_key", "Reviewing", "require_reviewer"]

_annotator_scheme = HTTPBearer(auto_error=False, scheme_name="AnnotatorToken",
                               description="The token `labelq workers enroll` printed.")
_operator_scheme = HTTPBearer(auto_error=False, scheme_name="OperatorToken",
                              description="The value of LABELQ_OPERATOR_TOKEN.")
_reviewer_scheme = HTTPBearer(auto_error=False, scheme_name="ReviewerToken",
                              description="The token `labelq reviewers add` printed, or the "
                                          "operator token.")


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
    project = request.query_params.get("project") or None
    key = signin_key(hash_token(creds.credentials), project)
    hit = rt.signins.get(key)
    if hit is not None and time.monotonic() - hit[0] < rt.signin_max_age:
        who = hit[1]
    else:
        who = await run_in_threadpool(sign_in, rt, creds.credentials, key, project)
    if who.worker.status == "removed":
        raise Forbidden(f"worker {who.worker.handle!r} has been removed from the project",
                        worker=who.worker.handle)
    return who


def signin_key(token_hash: str, project: str | None) -> str:
    """``Runtime.signins``' key of a token (its hash) and the project a request names: the
    hash alone when it names none (the key the fast path looks up)."""
    return token_hash if project is None else f"{token_hash}\n{project}"


def sign_in(rt: Runtime, token: str, key: str, project_name: str | None = None) -> Annotator:
    with session_scope(rt.engine) as session:
        rows = workers_by_token(session, token)
        if not rows:
            raise Unauthorized("unknown token; ask your operator for a valid one")
        worker = choose_enrolment(rows, rows[0][0].handle, project_name)[0]
        project = session.get(Project, worker.project_id)
    assert project is not None  # foreign key
    who = Annotator(worker, project)
    if len(rt.signins) > 10_000:  # many tokens seen: start afresh rather than grow
        rt.signins.clear()
    rt.signins[key] = (time.monotonic(), who)
    return who


@dataclass(frozen=True)
class Person:
    """The signed-in person and every enrolment of theirs (worker row, project name), oldest
    first: for ``GET /me/projects``, which names no project (read from SQL each time)."""

    handle: str
    enrolments: list[tuple[Worker, str]]


def current_person(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(
        _annotator_scheme)) -> Person:
    if creds is None or not creds.credentials:
        raise Unauthorized("sign in: send 'Authorization: Bearer <your token>'")
    rt: Runtime = request.app.state.labelq
    with session_scope(rt.engine) as session:
        rows = workers_by_token(session, creds.credentials)
    if not rows:
        raise Unauthorized("unknown token; ask your operator for a valid one")
    if all(w.status == "removed" for w, _ in rows):
        handle = rows[0][0].handle
        raise Forbidden(f"worker {handle!r} has been removed from every project",
                        worker=handle)
    return Person(rows[0][0].handle, rows)


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


@dataclass(frozen=True)
class Reviewing:
    """Who answers on the review page: ``name`` (``operator`` for the operator token) and
    the ``projects`` it may review (None: every project)."""

    name: str
    projects: tuple[str, ...] | None

    def check(self, project: str) -> None:
        if self.projects is not None and project not in self.projects:
            raise Forbidden(f"reviewer {self.name!r} may not review project {project!r}",
                            project=project)


def require_reviewer(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(
        _reviewer_scheme)) -> Reviewing:
    from ..record.reviewers import reviewer_by_token

    if creds is None or not creds.credentials:
        raise Unauthorized("sign in: send 'Authorization: Bearer <your reviewer token>'")
    expected = request.app.state.labelq.settings.operator_token
    if expected and hmac.compare_digest(_digest(creds.credentials), _digest(expected)):
        return Reviewing("operator", None)
    with session_scope(request.app.state.labelq.engine) as session:
        row = reviewer_by_token(session, creds.credentials)
        if row is None:
            raise Unauthorized("unknown reviewer token; ask your operator for one "
                               "(labelq reviewers add NAME)")
        return Reviewing(row.name, tuple(row.projects) or None)
