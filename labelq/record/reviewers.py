"""Reviewers: experts who answer on the review page (``/review``) with a token that can do
nothing else (``labelq reviewers add|list|remove``). As an annotator's, only the token's
sha256 is stored (:func:`~labelq.record.projects.hash_token`): the token is shown once, when
made. A reviewer may review the projects it was given (none given: every project)."""

from __future__ import annotations

import secrets
from typing import Any

from sqlmodel import Session, col, select

from ..errors import Conflict, InputError, NotFound
from .models import Reviewer
from .projects import get_project, hash_token

__all__ = ["add_reviewer", "list_reviewers", "remove_reviewer", "reviewer_by_token",
           "may_review"]


def add_reviewer(session: Session, name: str, projects: list[str] | None = None
                 ) -> tuple[Reviewer, str]:
    """A new reviewer ``name`` (of ``projects``, each checked to exist; none: every
    project) and its token (returned once; only its hash is kept)."""
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError(f"reviewer name must be 1-200 printable characters, got {name!r}",
                         field="name")
    if session.exec(select(Reviewer).where(col(Reviewer.name) == name)).first() is not None:
        raise Conflict(f"reviewer {name!r} exists already (labelq reviewers remove {name} "
                       "first, for a new token)", reviewer=name)
    names = list(dict.fromkeys(projects or []))
    for p in names:
        get_project(session, p)  # (NotFound naming it)
    token = secrets.token_urlsafe(24)
    row = Reviewer(name=name, token_hash=hash_token(token), projects=names)
    session.add(row)
    session.flush()
    return row, token


def list_reviewers(session: Session) -> list[dict[str, Any]]:
    return [{"name": r.name, "projects": list(r.projects) or "all",
             "created": r.created.isoformat(timespec="seconds")}
            for r in session.exec(select(Reviewer).order_by(col(Reviewer.name)))]


def remove_reviewer(session: Session, name: str) -> None:
    """Remove reviewer ``name``: its token stops working at once."""
    row = session.exec(select(Reviewer).where(col(Reviewer.name) == name)).first()
    if row is None:
        raise NotFound(f"no reviewer {name!r}", reviewer=name)
    session.delete(row)
    session.flush()


def reviewer_by_token(session: Session, token: str) -> Reviewer | None:
    row: Reviewer | None = session.exec(
        select(Reviewer).where(col(Reviewer.token_hash) == hash_token(token))).first()
    return row


def may_review(projects: list[str] | None, project: str) -> bool:
    """Whether a reviewer of ``projects`` (None or empty: every project) may review
    ``project``."""
    return not projects or project in projects
