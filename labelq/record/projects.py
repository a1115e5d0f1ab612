"""Operator operations on projects and workers, over the durable record.

Used by the CLI and (later) the HTTP API; every function takes an open ``Session`` and
raises :mod:`labelq.errors` exceptions with context.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, update
from sqlmodel import Session, SQLModel, col, select

from ..errors import (
    AlreadyExists,
    Conflict,
    FileFormatError,
    InputError,
    LabelqError,
    NotFound,
    PolicyError,
)
from ..policies.spec import PolicySpec
from .models import (
    ENDED_UNLABELLED,
    MARK_KINDS,
    Assignment,
    GoldDraw,
    Label,
    PauseEvent,
    PendingGoldMark,
    Project,
    Reviewer,
    SavedState,
    Task,
    Worker,
    utcnow,
)
from .names import NAME_PATTERN, check_name  # (below .predictions too, which uses it)

__all__ = ["create_project", "parse_quality", "check_gold_schedule", "update_project",
           "get_project", "list_projects", "enroll_worker", "get_task", "get_worker",
           "budget_spent", "unknown_categories", "list_workers", "set_worker_status", "hash_token",
           "worker_by_token", "workers_by_token", "enrolments", "choose_enrolment",
           "set_preferred", "reset_token", "correct_gold", "GoldMark", "MarkedGold",
           "mark_gold", "read_gold_marks", "project_counts",
           "delete_project", "parse_label_set", "NAME_PATTERN", "check_name",
           "check_policy_fits", "parse_label_names", "read_instructions",
           "BINARY_METHODS", "methods_for", "check_method"]

MAX_INSTRUCTIONS = 100_000  # characters
MAX_DISPLAY_NAME = 200
_NAME_ITEM = re.compile(r'\s*([^=,]+?)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*?)\s*(?:,|$)')


POLICY_AGGREGATED = ("bbta",)
# A project's aggregation setting: a method of labelq.aggregation, or the policy's own posterior
METHODS = ("auto", "mv", "wmv", "ds", "onecoin", "glad", "kos", "ds-category", "shrunk",
           "policy")

# methods that run only on two classes (labelq.aggregation.kos: Karger, Oh & Shah's message
# passing is for binary labels); every other method runs on any number of classes
BINARY_METHODS = ("kos",)


def methods_for(labels: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The aggregation methods that can run on a project with label set ``labels``."""
    return tuple(m for m in METHODS if len(labels) == 2 or m not in BINARY_METHODS)


def check_method(project: Project, method: str, field: str = "method") -> str:
    """``method`` if it can aggregate ``project``'s labels; else an :class:`InputError`
    listing the methods that can (before any work is done)."""
    allowed = methods_for(project.labels)
    if method not in allowed:
        why = (f"{method} is for binary labels and project {project.name!r} has "
               f"{len(project.labels)} classes" if method in METHODS else
               f"unknown aggregation method {method!r}")
        raise InputError(f"{why}; choose from {', '.join(allowed)}", field=field,
                         project=project.name)
    return method


def check_policy_fits(spec: PolicySpec, labels: list[str]) -> None:
    """Refuse a policy that cannot serve ``labels`` (a binary one on three labels would
    fail every ``next`` later): its ``init_state`` on a one-task problem with that many
    classes must succeed. Asking the policy itself keeps this true as policies change."""
    try:
        from ..policies import Problem, build

        build(spec).init_state(Problem(n_tasks=1, n_workers=1, n_classes=len(labels)))
    except PolicyError as exc:
        raise PolicyError(f"policy {spec} cannot serve the label set {labels} "
                          f"({len(labels)} classes): {exc}", policy=spec.name) from exc


def parse_label_set(text: str | list[str]) -> list[str]:
    labels = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    if len(labels) < 2:
        raise InputError(f"a label set needs at least two labels, got {labels!r}")
    if any(not s for s in labels):
        raise InputError(f"empty label in label set {labels!r}")
    if len(set(labels)) != len(labels):
        raise InputError(f"duplicate label in label set {labels!r}")
    return labels


def parse_label_names(text: str | dict[str, str] | None,
                      labels: list[str]) -> dict[str, str] | None:
    """``neg="Negative",pos="Positive"`` (or ``neg=Negative,pos=Positive``; a quoted name
    may hold commas, ``\\"`` a quote) or a dict -> display names by label value. Every key
    must be in ``labels``; an empty text clears them (``None``)."""
    if text is None:
        return None
    if isinstance(text, dict):
        items = list(text.items())
    else:
        items, pos = [], 0
        text = text.strip()
        while pos < len(text):
            m = _NAME_ITEM.match(text, pos)
            if m is None or m.end() == pos:
                raise InputError(f"--label-names: expected label=\"Name\",... at "
                                 f"{text[pos:pos + 30]!r}", field="label_names")
            value = m.group(2)
            if value.startswith('"'):
                value = re.sub(r'\\(.)', r'\1', value[1:-1])
            items.append((m.group(1), value))
            pos = m.end()
    names: dict[str, str] = {}
    for key, value in items:
        value = str(value).strip()
        if key not in labels:
            raise InputError(f"--label-names: {key!r} is not a label of the set {labels}",
                             field="label_names")
        if key in names:
            raise InputError(f"--label-names: {key!r} named twice", field="label_names")
        if not value or len(value) > MAX_DISPLAY_NAME or any(ord(c) < 32 for c in value):
            raise InputError(f"--label-names: the name of {key!r} must be 1 to "
                             f"{MAX_DISPLAY_NAME} printable characters", field="label_names")
        names[key] = value
    shown = [names.get(v, v) for v in labels]
    if len(set(shown)) != len(shown):
        raise InputError(f"--label-names: two labels would show the same name ({shown})",
                         field="label_names")
    return names or None


def read_instructions(path: str) -> str | None:
    """The instructions file (UTF-8 text, Markdown by convention); empty: none."""
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the instructions: {exc}", path=str(path)) from exc
    if len(text) > MAX_INSTRUCTIONS:
        raise InputError(f"{path}: instructions of {len(text)} characters; at most "
                         f"{MAX_INSTRUCTIONS}", path=str(path))
    if "\x00" in text:
        raise InputError(f"{path}: the instructions hold a NUL character", path=str(path))
    return text.strip() or None


def parse_quality(text: str | dict[str, Any] | None) -> dict[str, Any]:
    """Validate a quality rule (``threshold=0.7,min_gold=10[,confidence=0.95,per_category=true,
    rule=sequential]``
    or the same as a dict) with :class:`labelq.gold.quality.QualityRule`; ``{}`` = no rule."""
    from ..gold.quality import QualityRule

    if not text:
        return {}
    if isinstance(text, str):
        spec = PolicySpec.parse("quality:" + text)
        params = spec.params
    else:
        params = dict(text)
    try:
        rule = QualityRule(**params)
    except TypeError as exc:
        raise InputError(f"quality rule {text!r}: {exc}; it takes threshold, min_gold, "
                         "confidence, per_category, rule") from exc
    except ValueError as exc:
        raise InputError(f"quality rule {text!r}: {exc}") from exc
    return {"threshold": rule.threshold, "min_gold": rule.min_gold,
            "confidence": rule.confidence, "per_category": rule.per_category,
            "rule": rule.rule}


def check_gold_schedule(text: str | None) -> str | None:
    """Validate a gold schedule spec (``fixed:rate=0.1``, ``onboarding:...``, ``epochs:...``,
    ``per-category:s=3``, ``none``) and return it normalised (``None`` for no gold)."""
    from ..gold.schedules import schedule_from_spec

    if text is None or not text.strip() or text.strip() == "none":
        return None
    schedule_from_spec(text)
    return text.strip()


def create_project(session: Session, name: str, labels: str | list[str], *,
                   policy: str | dict[str, Any] = "auto", budget: float | None = None,
                   max_labels: int | None = None, aggregation: str | None = None,
                   gold_schedule: str | None = None,
                   quality: str | dict[str, Any] | None = None,
                   instructions: str | None = None,
                   label_names: str | dict[str, str] | None = None,
                   show_suggestions: bool = False) -> Project:
    name = check_name(name, "project name")
    label_set = parse_label_set(labels)
    spec = PolicySpec.parse(policy) if isinstance(policy, str) else PolicySpec.from_json(policy)
    check_policy_fits(spec, label_set)  # name, parameters, label set; raises PolicyError
    if aggregation is None:
        # a BBTA project's labels are best read with its own learned per-category weights;
        # otherwise auto picks what the labels support (ds fell below majority vote early on)
        aggregation = "policy" if spec.name in POLICY_AGGREGATED else "auto"
    if aggregation not in methods_for(label_set):
        raise InputError(f"aggregation method {aggregation!r} cannot run on {len(label_set)} "
                         f"classes; choose from {', '.join(methods_for(label_set))}"
                         if aggregation in METHODS else
                         f"unknown aggregation method {aggregation!r}; choose from "
                         f"{', '.join(methods_for(label_set))}", field="aggregation")
    if budget is not None and budget <= 0:
        raise InputError(f"budget must be positive, got {budget}")
    if max_labels is not None and max_labels < 1:
        raise InputError(f"max labels per task must be at least 1, got {max_labels}")
    if session.exec(select(Project).where(Project.name == name)).first():
        raise AlreadyExists(f"project {name!r} already exists", project=name)
    project = Project(name=name, labels=label_set, policy=spec.to_json(), budget=budget,
                      max_labels=max_labels, aggregation=aggregation,
                      gold_schedule=check_gold_schedule(gold_schedule),
                      quality=parse_quality(quality),
                      instructions=(instructions or "").strip() or None,
                      label_names=parse_label_names(label_names, label_set),
                      show_suggestions=bool(show_suggestions))
    session.add(project)
    session.flush()
    return project


def update_project(session: Session, name: str, **changes: Any) -> Project:
    """Change a project's budget, label cap, aggregation, gold schedule, quality rule,
    instructions (``""`` removes them), label display names (``""`` removes them) or
    whether the labeling page shows the model's answer (``show_suggestions``).
    ``None`` leaves a setting as it is. A project whose policy cannot serve its label set
    (created before that was checked) is refused: no setting makes its ``next`` work."""
    project = get_project(session, name)
    check_policy_fits(PolicySpec.from_json(project.policy), project.labels)
    if changes.get("budget") is not None:
        if changes["budget"] <= 0:
            raise InputError(f"budget must be positive, got {changes['budget']}")
        project.budget = changes["budget"]
    if changes.get("max_labels") is not None:
        if changes["max_labels"] < 1:
            raise InputError(f"max labels per task must be at least 1, got {changes['max_labels']}")
        project.max_labels = changes["max_labels"]
    if changes.get("aggregation") is not None:
        check_method(project, changes["aggregation"], field="aggregation")
        project.aggregation = changes["aggregation"]
    if changes.get("gold_schedule") is not None:
        project.gold_schedule = check_gold_schedule(changes["gold_schedule"])
    if changes.get("quality") is not None:
        project.quality = parse_quality(changes["quality"])
    if changes.get("instructions") is not None:
        project.instructions = changes["instructions"].strip() or None
    if changes.get("label_names") is not None:
        project.label_names = parse_label_names(changes["label_names"], project.labels)
    if changes.get("show_suggestions") is not None:
        project.show_suggestions = bool(changes["show_suggestions"])
    session.add(project)
    session.flush()
    return project


def get_project(session: Session, name: str) -> Project:
    # (annotated: mypy reads sqlmodel's select(...).where(...) as Any)
    project: Project | None = session.exec(
        select(Project).where(col(Project.name) == name)).first()
    if project is None:
        raise NotFound(f"no project named {name!r}", project=name)
    return project


def list_projects(session: Session) -> list[Project]:
    return list(session.exec(select(Project).order_by(col(Project.id))))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def enroll_worker(session: Session, project: Project, handle: str, *, cost: float = 1.0,
                  capacity: int | None = None, categories: list[str] | None = None,
                  preferred: bool = False) -> tuple[Worker, str | None]:
    """Enroll annotator ``handle`` in ``project``; returns the enrolment and the person's
    new token (shown once, stored hashed), or ``None`` for a person already enrolled in
    another project: the new enrolment takes their token (one token, every project).
    ``preferred``: make ``project`` the person's default (:func:`set_preferred`)."""
    handle = check_name(handle, "worker handle")
    if cost < 0:
        raise InputError(f"cost per label must be non-negative, got {cost}")
    if capacity is not None and capacity < 1:
        raise InputError(f"capacity must be at least 1 label, got {capacity}")
    rows = list(session.exec(select(Worker).where(col(Worker.handle) == handle)
                             .order_by(col(Worker.id))))
    if any(w.project_id == project.id for w in rows):
        raise AlreadyExists(f"worker {handle!r} is already enrolled in project "
                            f"{project.name!r}", worker=handle, project=project.name)
    seq = session.exec(select(func.coalesce(func.max(Worker.seq) + 1, 0))
                       .where(Worker.project_id == project.id)).one()
    token: str | None = None
    if rows:  # an existing person: their token, unchanged
        token_hash = rows[0].token_hash
    else:
        token = secrets.token_urlsafe(24)
        token_hash = hash_token(token)
    worker = Worker(project_id=project.id, seq=seq, handle=handle, cost=cost,
                    capacity=capacity, token_hash=token_hash,
                    categories=[c.strip() for c in categories or [] if c.strip()])
    session.add(worker)
    session.flush()
    if preferred:
        set_preferred(session, handle, project)
    return worker, token


def enrolments(session: Session, handle: str) -> list[tuple[Worker, str]]:
    """Every enrolment of person ``handle`` with its project's name, oldest first."""
    return [(w, name) for w, name in session.exec(
        select(Worker, col(Project.name)).join(Project, col(Project.id) == col(Worker.project_id))
        .where(col(Worker.handle) == handle).order_by(col(Worker.id))).all()]


def set_preferred(session: Session, handle: str, project: Project) -> Worker:
    """Make ``project`` the default of person ``handle`` (``labelq workers default``): the
    project a client that names none works in. NotFound if they are not enrolled there."""
    mine = get_worker(session, handle, project)
    session.execute(update(Worker).where(col(Worker.handle) == handle)
                    .values(preferred=col(Worker.id) == mine.id))
    session.flush()
    session.refresh(mine)
    return mine


def choose_enrolment(rows: Sequence[tuple[Worker, str]], handle: str,
                     project: str | None) -> tuple[Worker, str]:
    """Which of a person's enrolments (``rows``: worker and project name) a request works
    in: the project it names; else the one enrolment; else the operator's default
    (``preferred``); else an :class:`InputError` naming the projects to choose from
    (NotFound for a project they are not enrolled in)."""
    if project is not None:
        for w, name in rows:
            if name == project:
                return w, name
        raise NotFound(f"worker {handle!r} is not enrolled in project {project!r}",
                       worker=handle, project=project)
    # (an enrolment the person was removed from is chosen only if it is all they have)
    open_ = [(w, name) for w, name in rows if w.status != "removed"] or list(rows)
    if len(open_) == 1:
        return open_[0]
    for w, name in open_:
        if w.preferred:
            return w, name
    names = ", ".join(repr(name) for _, name in rows)
    raise InputError(f"worker {handle!r} is enrolled in projects {names}: name one "
                     "(API: ?project=NAME; CLI: --project NAME), or have the operator set a "
                     "default (labelq workers default)", worker=handle, field="project",
                     projects=[name for _, name in rows])


def project_counts(session: Session, project: Project) -> dict[str, int]:
    """How many rows of each kind the project owns."""
    return {name: int(session.exec(select(func.count()).select_from(model)
                                   .where(model.project_id == project.id)).one())
            for name, model in (("tasks", Task), ("workers", Worker), ("labels", Label),
                                ("assignments", Assignment))}


def _forget_reviewers(session: Session, name: str) -> None:
    """Take project ``name`` (being deleted) off every reviewer's projects, so that a
    project created later under the name is not theirs; a reviewer left with none is
    removed, its token stopping as the project's annotators' do (an empty list means
    every project). Here, not in :mod:`.reviewers`, which imports this module."""
    for row in session.exec(select(Reviewer)).all():
        if name not in row.projects:
            continue
        left = [p for p in row.projects if p != name]
        if left:
            row.projects = left
            session.add(row)
        else:
            session.delete(row)
    session.flush()


def delete_project(session: Session, project: Project) -> dict[str, int]:
    """Delete the project and everything it owns from SQL (a model's predictions and
    versions, labels, assignments, gold draws, tasks, pause trails, workers, in that order
    for the foreign keys), its saved policy state, its hooks, and its name from reviewers'
    projects (a reviewer of it alone is removed), in the caller's transaction; returns
    what was deleted. Its Redis state is the caller's to drop first."""
    counts = project_counts(session, project)
    from .predictions import delete_all
    from .tally import forget

    assert project.id is not None, "a project read from the database has its id"
    forget(session, project.id)  # its status counters
    delete_all(session, project.id)
    session.exec(delete(SavedState).where(col(SavedState.project_id) == project.id))
    from .hooks import delete_project_hooks
    delete_project_hooks(session, project.id)
    _forget_reviewers(session, project.name)  # (reviewers are given projects by name)
    for model in (Label, Assignment, GoldDraw, PendingGoldMark, Task, PauseEvent, Worker):
        session.exec(delete(model).where(col(model.project_id) == project.id))
    session.delete(project)
    session.flush()
    return counts


def correct_gold(session: Session, project: Project, external_id: str,
                 answer: str, *, source: str | None = None) -> dict[str, Any]:
    """Set the answer of gold question ``external_id`` (a wrong one scores careful
    annotators as wrong, and may pause them). Returns the old and new answer and how many
    labels it re-scores. Gold scores, the quality rule and exports read answers from SQL;
    the live policy state must be folded again (:func:`labelq.live.hotstate.bump_epoch`).
    The task's ``gold_source`` becomes ``correct`` followed by ``source`` (who corrected
    it: ``cli`` for ``labelq gold correct``), so the answer is never credited to the file
    or reviewer that gave the wrong one."""
    if answer not in project.labels:
        raise InputError(f"answer {answer!r} is not in the label set {project.labels}",
                         field="answer")
    task = get_task(session, project, external_id)
    if not task.is_gold:
        raise InputError(f"task {external_id!r} is not a gold question", task=external_id)
    old = task.gold_answer
    task.gold_answer = answer
    task.gold_source = ("correct" if source is None else f"correct {source}")[:500]
    session.add(task)
    session.flush()
    n = session.exec(select(func.count(col(Label.id)))
                     .where(col(Label.task_id) == task.id)).one()
    return {"task": external_id, "old_answer": old, "answer": answer, "labels": int(n)}


@dataclass(frozen=True)
class GoldMark:
    """Task ``task`` (its id) has the known answer ``answer``; ``line``: where a file said so;
    ``kind``: the gold kind this mark gives (None: :func:`mark_gold`'s ``kind``, else the
    task's default); ``source``: who or what gave the answer, for ``Task.gold_source``
    (None: :func:`mark_gold`'s ``source``; a queued mark applied later carries its
    queue row's)."""

    task: str
    answer: str
    line: int | None = None
    kind: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class MarkedGold:
    """What :func:`mark_gold` changed."""

    tasks: list[int]  # seqs of the tasks made gold questions now
    category_names: list[str]  # the project's categories, sorted (as ProjectView's)
    skipped: int  # gold questions already, with the same answer
    labels: int  # labels on them, now gold answers
    workers: list[int]  # seqs of the workers who gave those labels
    # (worker seq, category index) -> how many of the marked tasks each worker was given
    # (a label, or an assignment declined or expired): now gold questions issued to them
    issued: dict[tuple[int, int], int]
    # kind -> how many of the tasks marked now are of it (audit, suggested, reviewed)
    kinds: dict[str, int] = field(default_factory=dict)
    # the marks of ``defer`` (checked, not marked: their tasks are assigned right now), with
    # their tasks' SQL ids, in the order given
    deferred: list[tuple[GoldMark, int]] = field(default_factory=list)

    @property
    def random_workers(self) -> list[int]:
        """The workers whose labels became *random* gold answers (audit): the only ones
        whose scores the mark changed."""
        return self.workers if self.kinds.get("audit") else []


_IN_CHUNK = 5000  # ids per IN (...) list
_TABLES = SQLModel.metadata.tables  # (typed: a model's __table__ is not, to mypy)


def mark_gold(session: Session, project: Project, marks: Sequence[GoldMark], *,
              source: str | Path | None = None, kind: str | None = None,
              defer: Collection[str] = ()) -> MarkedGold:
    """Make ordinary tasks of ``project`` gold questions with known answers (an expert's
    review, say): their labels become gold answers that score the annotators who gave
    them, and they are served as gold from now on. The tasks stay data: an export gives
    each its known answer. All or nothing: every mark is checked before anything is
    written — the answer in the label set, the task there, not a gold question with
    another answer (that is :func:`correct_gold`'s job) — and a bad one raises, naming
    ``source``'s line and field when the marks come from a file. A task already gold with
    the same answer is skipped. The caller's transaction holds the change; the live
    pipeline's state must move with it (:func:`labelq.live.goldmark.mark_gold_live`).

    Each marked task gets a kind (``Task.gold_kind``): ``kind`` if given (one of
    :data:`~labelq.record.models.MARK_KINDS`), else ``audit`` if an audit drew it (a random
    sample: its answers score annotators), ``suggested`` if ``labelq gold suggest`` listed
    it, else ``reviewed`` (both chosen: they score no one); a mark's own ``kind`` comes
    first.

    Each marked task records where its answer came from (``Task.gold_source``): a mark's
    own ``source`` if given, else ``source`` (the file, ``cli``, ``review NAME``), cut to
    500 characters.

    ``defer``: task ids whose marks are checked as the others are but not written (their
    tasks are assigned right now: :func:`labelq.live.goldmark.mark_gold_live` queues them);
    :attr:`MarkedGold.deferred` lists them."""
    from .golddraw import draw_kinds, mark_kind

    for k in [kind, *(m.kind for m in marks)]:
        if k is not None and k not in MARK_KINDS:
            raise InputError(f"unknown gold kind {k!r}; choose from {', '.join(MARK_KINDS)}",
                             field="kind")
    def bad(m: GoldMark, field: str, message: str, exc: type[LabelqError]) -> LabelqError:
        if source is not None and m.line is not None:
            return FileFormatError(str(source), m.line, field, message)
        return exc(message, task=m.task)

    ids = list(dict.fromkeys(m.task for m in marks))
    found: dict[str, Task] = {}
    for i in range(0, len(ids), _IN_CHUNK):
        found.update((t.external_id, t) for t in session.exec(select(Task).where(
            Task.project_id == project.id, col(Task.external_id).in_(ids[i:i + _IN_CHUNK]))))
    allowed, skipped = set(project.labels), 0
    todo: dict[str, tuple[Task, str]] = {}
    mark_of: dict[str, GoldMark] = {}
    for m in marks:
        if m.answer not in allowed:
            raise bad(m, "answer", f"{m.answer!r} is not in the label set {project.labels}",
                      InputError)
        task = found.get(m.task)
        if task is None:
            raise bad(m, "id", f"no task {m.task!r} in project {project.name!r}", NotFound)
        was = todo[m.task][1] if m.task in todo else task.gold_answer if task.is_gold \
            else None
        if was == m.answer:
            skipped += m.task not in todo  # (the same mark twice in one list: once)
        elif was is not None:
            raise bad(m, "answer", f"task {m.task!r} is a gold question already, with answer "
                      f"{was!r}; a wrong gold answer is changed with labelq gold correct",
                      Conflict)
        else:
            todo[m.task] = (task, m.answer)
            mark_of[m.task] = m
    deferred = [(mark_of[e], int(t.id or 0)) for e, (t, _a) in todo.items() if e in defer]
    marked = [(t, a) for e, (t, a) in todo.items() if e not in defer]
    now = utcnow()
    drawn = draw_kinds(session, [int(t.id or 0) for t, _a in marked])
    kind_of = {t.id: mark_of[t.external_id].kind or kind or mark_kind(drawn.get(int(t.id or 0)))
               for t, _a in marked}
    # one UPDATE per (answer, kind, source) the marks share, in their first order
    groups: dict[tuple[str, str, str | None], list[int | None]] = {}
    for t, a in marked:
        src = mark_of[t.external_id].source or (None if source is None else str(source))
        groups.setdefault((a, kind_of[t.id], None if src is None else src[:500]),
                          []).append(t.id)
    conn, tt, lt = session.connection(), _TABLES["task"], _TABLES["label"]
    for (answer, k, src), tids in groups.items():
        for i in range(0, len(tids), _IN_CHUNK):
            conn.execute(update(tt).where(tt.c.id.in_(tids[i:i + _IN_CHUNK]))
                         .values(is_gold=True, gold_answer=answer, marked=now, gold_kind=k,
                                 gold_source=src))
    tids = [t.id for t, _a in marked]
    categories = sorted(session.exec(select(Task.category).distinct().where(
        Task.project_id == project.id)).all()) if marked else []  # as load_view orders them
    cat_index = {c: i for i, c in enumerate(categories)}
    seq_of = {t.id: (t.seq, cat_index[t.category]) for t, _a in marked}
    labels = 0
    workers: set[int] = set()
    issued: dict[tuple[int, int], int] = {}
    for i in range(0, len(tids), _IN_CHUNK):
        chunk = tids[i:i + _IN_CHUNK]
        res = conn.execute(update(lt).where(lt.c.task_id.in_(chunk)).values(is_gold=True))
        labels += max(res.rowcount, 0)
        given = session.exec(select(col(Worker.seq), col(Label.task_id))
                             .join(Label, col(Label.worker_id) == col(Worker.id))
                             .where(col(Label.task_id).in_(chunk))).all()
        workers.update(w for w, _t in given)
        ended = session.exec(select(col(Worker.seq), col(Assignment.task_id))
                             .join(Assignment, col(Assignment.worker_id) == col(Worker.id))
                             .where(col(Assignment.task_id).in_(chunk),
                                    col(Assignment.state).in_(ENDED_UNLABELLED))).all()
        for w, t in list(given) + list(ended):
            key = (int(w), seq_of[t][1])
            issued[key] = issued.get(key, 0) + 1
    session.expire_all()  # the Task and Label objects loaded here predate the update
    return MarkedGold(tasks=[seq_of[t][0] for t in tids],
                      category_names=categories,
                      skipped=skipped, labels=labels, workers=sorted(int(w) for w in workers),
                      issued=issued, kinds=dict(Counter(kind_of.values())),
                      deferred=deferred)


def read_gold_marks(path: str | Path, project: Project, fmt: str | None = None
                    ) -> list[GoldMark]:
    """The marks of a CSV or JSONL file with ``id`` and ``answer`` (other columns are
    ignored), validated as ``labelq gold load`` validates a gold file."""
    from .loading import parse_task_file

    return [GoldMark(r.external_id, r.answer or "", r.line)
            for r in parse_task_file(path, gold=True, label_set=project.labels, fmt=fmt)]


def budget_spent(session: Session, project: Project) -> float:
    """What the project's labels have cost so far (each its worker's cost per label)."""
    return float(session.exec(select(func.coalesce(func.sum(col(Worker.cost)), 0.0))
                              .select_from(Label)
                              .join(Worker, col(Worker.id) == col(Label.worker_id))
                              .where(col(Label.project_id) == project.id)).one())


def unknown_categories(session: Session, project: Project, categories: list[str]) -> list[str]:
    """Those of ``categories`` that no task of the project has (yet)."""
    known = set(session.exec(select(Task.category).distinct()
                             .where(Task.project_id == project.id)))
    return [c for c in categories if c not in known]


def get_task(session: Session, project: Project, external_id: str) -> Task:
    task: Task | None = session.exec(select(Task).where(
        col(Task.project_id) == project.id, col(Task.external_id) == external_id)).first()
    if task is None:
        raise NotFound(f"no task {external_id!r} in project {project.name!r}",
                       task=external_id)
    return task


def get_worker(session: Session, handle: str,
               project: Project | str | int | None = None) -> Worker:
    """Worker ``handle``'s enrolment in ``project`` (a row, a name or an id); ``None``:
    their only one (or their default, :func:`choose_enrolment`)."""
    if isinstance(project, (Project, int)):
        pid = project if isinstance(project, int) else project.id
        worker: Worker | None = session.exec(select(Worker).where(
            col(Worker.handle) == handle, col(Worker.project_id) == pid)).first()
        if worker is None:
            if session.exec(select(Worker.id).where(col(Worker.handle) == handle)).first():
                shown = project.name if isinstance(project, Project) else project
                raise NotFound(f"worker {handle!r} is not enrolled in project "
                               f"{shown!r}", worker=handle, project=shown)
            raise NotFound(f"no worker with handle {handle!r}", worker=handle)
        return worker
    rows = enrolments(session, handle)
    if not rows:
        raise NotFound(f"no worker with handle {handle!r}", worker=handle)
    return choose_enrolment(rows, handle, project)[0]


def reset_token(session: Session, handle: str) -> tuple[Worker, str]:
    """Give annotator ``handle`` a new token (a lost one cannot be shown again: only its
    hash is stored), in every project they are enrolled in; the old one stops working."""
    rows = enrolments(session, handle)
    if not rows:
        raise NotFound(f"no worker with handle {handle!r}", worker=handle)
    worker = rows[0][0]
    token = secrets.token_urlsafe(24)
    session.execute(update(Worker).where(col(Worker.handle) == handle)
                    .values(token_hash=hash_token(token)))
    session.flush()
    session.refresh(worker)
    return worker, token


def worker_by_token(session: Session, token: str, project: str | None = None) -> Worker | None:
    """The enrolment the token signs in to (:func:`choose_enrolment` with ``project``), or
    None for an unknown token."""
    rows = workers_by_token(session, token)
    if not rows:
        return None
    return choose_enrolment(rows, rows[0][0].handle, project)[0]


def workers_by_token(session: Session, token: str) -> list[tuple[Worker, str]]:
    """Every enrolment of the person whose token this is, with its project's name (oldest
    first; empty for an unknown token)."""
    return [(w, name) for w, name in session.exec(
        select(Worker, col(Project.name)).join(Project, col(Project.id) == col(Worker.project_id))
        .where(col(Worker.token_hash) == hash_token(token)).order_by(col(Worker.id))).all()]


def list_workers(session: Session, project: Project | None = None) -> list[Worker]:
    q = select(Worker).order_by(col(Worker.project_id), col(Worker.seq))
    if project is not None:
        q = q.where(col(Worker.project_id) == project.id)
    return list(session.exec(q))


def set_worker_status(session: Session, handle: str, status: str,
                      project: Project | str | None = None) -> Worker:
    if status not in ("active", "paused", "removed"):
        raise InputError(f"unknown worker status {status!r}; use active, paused or removed")
    worker = get_worker(session, handle, project)
    if status == "paused" and worker.status != "paused":  # the trail (labelq.record.pauses)
        from .pauses import record_operator_pause
        record_operator_pause(session, worker)
    if status == "active" and worker.status == "paused":  # (labelq.record.hooks' outbox)
        from .hooks import emit
        emit(session, worker.project_id, "annotator.resumed",
             {"worker": worker.handle, "by": "operator"})
    worker.status = status
    session.add(worker)
    session.flush()
    return worker
