"""The review page's endpoints, under ``/review/api``: an expert (a reviewer token, from
``labelq reviewers add``, or the operator token) answers the tasks ``labelq gold suggest``
listed and ``labelq gold audit`` drew, one at a time, as the page at ``/review`` shows them.

=======  ============================================  ===================================
method   path                                          does
=======  ============================================  ===================================
GET      /review/api/me                                the reviewer and its projects
GET      /review/api/projects/{name}/queue             tasks to answer (audit first), with
                                                       their payloads, no labels
GET      /review/api/projects/{name}/tasks/{id}/answers  the annotators' labels (on request)
POST     /review/api/projects/{name}/answers           an answer: gold of the task's kind,
                                                       through labelq gold mark's path (a
                                                       task assigned right now is queued)
=======  ============================================  ===================================
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam

from ..errors import Conflict
from ..live.goldmark import mark_gold_live
from ..record.db import session_scope
from ..record.golddraw import draw_kinds
from ..record.models import Project
from ..record.projects import GoldMark, get_project, get_task, list_projects
from ..record.review import review_queue, task_answers
from .auth import Reviewing, require_reviewer
from .errors import ERROR_RESPONSES
from .schemas import (
    Name,
    ReviewAnswer,
    ReviewAnswersOut,
    ReviewIn,
    ReviewMeOut,
    ReviewOut,
    ReviewProject,
    ReviewQueueOut,
)

__all__ = ["router", "PREFIX"]

PREFIX = "/review/api"
router = APIRouter(prefix=PREFIX, tags=["review"], responses=ERROR_RESPONSES)

ProjectPath = PathParam(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
                        description="The project's name.")
TaskPath = PathParam(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$",
                     description="The task's id.")


def _project_out(p: Project) -> ReviewProject:
    return ReviewProject(name=p.name, labels=list(p.labels), label_names=p.display_names(),
                         instructions=p.instructions or "")


@router.get("/me", response_model=ReviewMeOut, summary="The reviewer")
def me(request: Request, who: Reviewing = Depends(require_reviewer)) -> ReviewMeOut:
    with session_scope(request.app.state.labelq.engine) as session:
        return ReviewMeOut(reviewer=who.name, projects=[
            _project_out(p) for p in list_projects(session)
            if who.projects is None or p.name in who.projects])


@router.get("/projects/{name}/queue", response_model=ReviewQueueOut,
            summary="Tasks to answer")
def queue(request: Request, name: Name = ProjectPath,
          kind: str | None = Query(None, pattern="^(audit|suggested)$",
                                   description="Only audit or only suggested tasks."),
          limit: int = Query(50, ge=1, le=200),
          skip: list[str] = Query([], max_length=1000,
                                  description="Task ids passed over (repeat the parameter)."),
          who: Reviewing = Depends(require_reviewer)) -> ReviewQueueOut:
    """The tasks drawn for an expert's answer (``labelq gold audit``, then ``labelq gold
    suggest``) that are not gold yet nor queued for a mark, each with its payload as the
    labeling page shows it; the annotators' labels are not here (``/answers``), so that
    they do not sway the answer before it is given."""
    who.check(name)
    with session_scope(request.app.state.labelq.engine) as session:
        return ReviewQueueOut(**review_queue(session, get_project(session, name), kind=kind,
                                             limit=limit, skip=set(skip)))


@router.get("/projects/{name}/tasks/{task}/answers", response_model=ReviewAnswersOut,
            summary="The annotators' labels of a task")
def answers(request: Request, name: Name = ProjectPath, task: str = TaskPath,
            who: Reviewing = Depends(require_reviewer)) -> ReviewAnswersOut:
    who.check(name)
    with session_scope(request.app.state.labelq.engine) as session:
        t = get_task(session, get_project(session, name), task)
        return ReviewAnswersOut(task=t.external_id,
                                answers=[ReviewAnswer(**a) for a in task_answers(session, t)])


@router.post("/projects/{name}/answers", response_model=ReviewOut, summary="Answer a task")
def answer(body: ReviewIn, request: Request, name: Name = ProjectPath,
           who: Reviewing = Depends(require_reviewer)) -> ReviewOut:
    """The expert's answer to a task: it becomes a gold question of the kind the queue
    gave it (audit: a random sample, which scores its annotators; suggested: chosen, which
    scores no one), through ``labelq gold mark``'s path; a task assigned to an annotator
    right now is queued and marked when that assignment ends (``state`` says which); an
    answer queued earlier by ``labelq gold mark`` whose assignment ended since is replaced
    (``replaced`` says which answer). A
    task gold already with another answer, or one not drawn as ``kind``: 409 (``labelq
    gold correct`` changes a gold answer)."""
    who.check(name)
    rt = request.app.state.labelq
    with session_scope(rt.engine) as session:
        # the kind is the draw's, never the client's word: an answer of kind audit scores
        # annotators, so only a task an audit drew may be one
        t = get_task(session, get_project(session, name), body.task)
        if body.kind not in draw_kinds(session, [int(t.id or 0)]).get(int(t.id or 0), set()):
            raise Conflict(f"task {body.task!r} was not "
                           + ("drawn by an audit" if body.kind == "audit"
                              else "listed by labelq gold suggest")
                           + f": its answer cannot be gold of kind {body.kind}",
                           task=body.task)
    out = mark_gold_live(rt.engine, rt.redis, name, [GoldMark(body.task, body.answer,
                                                              kind=body.kind)],
                         source=f"review {who.name}", wait_s=10.0)
    state: Literal["marked", "queued", "skipped"] = (
        "queued" if out["queued"] else "marked" if out["marked"] else "skipped")
    replaced = [r["queued_answer"] for r in out["replaced"]]
    return ReviewOut(task=body.task, state=state, kind=body.kind,
                     replaced=replaced[0] if replaced else None)
