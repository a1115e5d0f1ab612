"""The durable record (SQLModel): the source of truth from which all hot state is rebuilt.

Tables: Project, Task, Worker, Assignment, Label, PauseEvent (every pause's trail),
ModelVersion and Prediction (a model's predictions, labelq/record/predictions.py),
GoldDraw, PendingGoldMark (gold marks waiting for an assignment to end), Reviewer, and
``labelq_database`` (one row: the
database's identity, which names its keys in Redis). Works on SQLite and PostgreSQL.

Every task and worker carries ``seq``, a dense index ``0..n-1`` within its project, which
is the index the policies' numpy state uses (``labelq.policies.base``). Labels are unique
per assignment, so a redelivered submission can never count twice.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    Index,
    LargeBinary,
    Text,
    UniqueConstraint,
    and_,
    event,
    exists,
    or_,
    text,
)
from sqlalchemy.engine import Connection
from sqlmodel import Field, SQLModel, col

__all__ = ["DatabaseIdentity", "Project", "Task", "Worker", "Assignment", "Label", "GoldDraw",
           "SavedState", "StatusTally", "TaskTally", "GoldTally", "WorkerTally", "EndedTally",
           "DashboardFigures", "ModelVersion", "Prediction", "PauseEvent",
           "PendingGoldMark", "Reviewer",
           "utcnow", "as_utc", "utc_from_ms",
           "WORKER_STATUSES", "ASSIGNMENT_STATES", "ENDED_UNLABELLED",
           "GOLD_KINDS", "RANDOM_GOLD_KINDS", "CHOSEN_GOLD_KINDS", "MARK_KINDS",
           "random_gold", "chosen_gold", "is_random_kind", "unsuggested"]

WORKER_STATUSES = ("active", "paused", "removed")
ASSIGNMENT_STATES = ("issued", "submitted", "declined", "expired")
# the states of an assignment that was issued and ended without a label: the task stays in
# the worker's seen set (``labelq rebuild``), and status and progress count them
ENDED_UNLABELLED = ("declined", "expired")

# What a gold answer is (``Task.gold_kind``; docs/gold.md, "Kinds of gold"): a *random*
# sample of the tasks — gold loaded as gold and served on the schedule (``loaded``), or
# tasks an audit drew uniformly at random (``audit``, :class:`GoldDraw`) — or *chosen*:
# tasks suggested for being disputed (``suggested``) or otherwise reviewed (``reviewed``).
# Random answers score annotators, pause them and calibrate; chosen ones never do.
GOLD_KINDS = ("loaded", "audit", "suggested", "reviewed")
RANDOM_GOLD_KINDS = ("loaded", "audit")
CHOSEN_GOLD_KINDS = ("suggested", "reviewed")
MARK_KINDS = ("audit", "suggested", "reviewed")  # what ``labelq gold mark --kind`` takes


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(t: datetime) -> datetime:
    """``t`` as read back from the database, in UTC: SQLite gives a stored time back
    naive (PostgreSQL aware)."""
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def utc_from_ms(ms: int) -> datetime:
    """The UTC datetime of a Unix time in milliseconds (the hot state's clock)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class DatabaseIdentity(SQLModel, table=True):
    """The one row naming this database: ``uid`` is made by ``labelq init`` (or by the
    schema upgrade ``init`` does on a database of an earlier labelq) and prefixes every
    Redis key of its projects (``lq:{uid:project}:...``), so several databases can share
    one Redis database without touching each other's hot state. ``secret`` (64 hex, made
    by ``init`` too, and by its upgrade of a database made before it) keys the MAC of the
    assignment ids this database's servers issue (:mod:`labelq.record.secret`)."""

    __tablename__ = "labelq_database"
    id: int = Field(default=1, primary_key=True)
    uid: str = Field(max_length=32)
    created: datetime = Field(default_factory=utcnow)
    # made with ``uid`` (by ``init``, and again by ``init --new-identity``): with where the
    # database lives, the check value of the identity's home in Redis (``lq:{uid}:home``,
    # labelq.live.home), by which a copy of the database knows it is one
    nonce: str | None = Field(default=None, max_length=32)
    # the key of the assignment ids' MAC (labelq.record.secret)
    secret: str | None = Field(default=None, max_length=64)


class Project(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    labels: list[str] = Field(sa_column=Column(JSON, nullable=False))
    policy: dict[str, Any] = Field(default_factory=lambda: {"name": "uniform", "params": {}},
                                   sa_column=Column(JSON, nullable=False))
    budget: float | None = None
    max_labels: int | None = None
    aggregation: str = "auto"
    gold_schedule: str | None = None
    quality: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created: datetime = Field(default_factory=utcnow)
    # added after the first release (labelq.record.db.ADDED_COLUMNS adds them to older databases):
    # what annotators read before labelling (Markdown source, shown as text), and display
    # names of labels by label value (labels without one show their value)
    instructions: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    label_names: dict[str, str] | None = Field(default=None,
                                                  sa_column=Column(JSON, nullable=True))
    # the labeling page shows the model's answer beside a task it predicted (issue 42; off
    # by default, NULL is off): labels given with one shown are marked ``Label.suggested``
    show_suggestions: bool | None = None

    def display_names(self) -> list[str]:
        """What the labeling page shows for each label, in the label set's order."""
        names = self.label_names or {}
        return [names.get(v) or v for v in self.labels]

    @property
    def is_binary(self) -> bool:
        return len(self.labels) == 2


class Task(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("project_id", "external_id", name="uq_task_external"),
        UniqueConstraint("project_id", "seq", name="uq_task_seq"),
        Index("ix_task_project_gold", "project_id", "is_gold"),
        # the tasks made gold after loading (labelq gold mark): few, read by status on
        # every request (labelq/record/tally.py); partial, so loading pays nothing for it
        Index("ix_task_project_marked", "project_id", "marked",
              sqlite_where=text("marked IS NOT NULL"),
              postgresql_where=text("marked IS NOT NULL")),
    )
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id")
    seq: int
    external_id: str = Field(max_length=500)
    category: str = Field(default="", max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    is_gold: bool = False
    gold_answer: str | None = None
    created: datetime = Field(default_factory=utcnow)
    # when an ordinary task was made a gold question (labelq gold mark); None for gold
    # loaded as gold. A marked task is still data: exported, with its answer
    marked: datetime | None = None
    # the gold answer's kind (GOLD_KINDS; None for an ordinary task). Added after the first
    # release: ``labelq init`` sets an older database's gold loaded as gold to ``loaded``
    # and its marked tasks to ``reviewed`` (labelq.record.db.BACKFILLS); a gold row with
    # none (written by an older process still running) reads as loaded if not marked,
    # else as reviewed (:func:`random_gold`)
    gold_kind: str | None = Field(default=None, max_length=16)
    # who or what gave the gold answer (docs/gold.md, "Where a gold answer came from"): the
    # file of ``labelq gold load``/``gold mark --file`` as given on the command line,
    # ``cli`` for ``gold mark NAME TASK ANSWER``, ``review NAME`` for the review page's
    # reviewer NAME, ``correct cli`` after ``labelq gold correct``; None for an ordinary
    # task and for gold written before the column (``labelq init`` adds it, NULL: an
    # unknown source is not guessed)
    gold_source: str | None = Field(default=None, max_length=500)


def random_gold() -> ColumnElement[bool]:
    """The SQL condition "this gold task's answer is a random sample" (loaded or audit):
    the answers that score annotators, pause them and calibrate."""
    return or_(col(Task.gold_kind).in_(RANDOM_GOLD_KINDS),
               and_(col(Task.gold_kind).is_(None), col(Task.marked).is_(None)))


def chosen_gold() -> ColumnElement[bool]:
    """The SQL condition "this gold task was chosen" (suggested or reviewed): its answer
    chooses the aggregation and corrects the task, and scores no one."""
    return or_(col(Task.gold_kind).in_(CHOSEN_GOLD_KINDS),
               and_(col(Task.gold_kind).is_(None), col(Task.marked).is_not(None)))


def unsuggested() -> ColumnElement[bool]:
    """The SQL condition "this label was given without a model's suggestion shown" (issue
    42): not marked ``suggested`` (the project showed none then, or this assignment was one
    withheld: :mod:`labelq.record.withheld`), or its task has no prediction (nothing to
    show). A prediction loaded after the label reads as shown: such an answer is left out,
    never counted wrongly. Gold answers score annotators on this condition only."""
    predicted = exists().where(col(Prediction.task_id) == col(Label.task_id))
    return or_(col(Label.suggested).is_not(True), ~predicted)


def is_random_kind(kind: str | None, marked: datetime | None) -> bool:
    """:func:`random_gold` of one gold task, in Python."""
    return kind in RANDOM_GOLD_KINDS if kind is not None else marked is None


class GoldDraw(SQLModel, table=True):
    """A task drawn for an expert's answer: by an audit (``labelq gold audit``, ``kind``
    ``audit``: drawn uniformly at random, so its answer, once marked, is a random sample)
    or listed by ``labelq gold suggest`` (``suggested``). ``labelq gold mark`` reads it to
    give a marked task its kind; kept in SQL so that a mark days later still knows."""

    __tablename__ = "gold_draw"
    __table_args__ = (UniqueConstraint("task_id", "kind", name="uq_gold_draw_task_kind"),
                      Index("ix_gold_draw_project_kind", "project_id", "kind"))
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id")
    task_id: int = Field(foreign_key="task.id")
    kind: str = Field(max_length=16)
    draw: str = Field(max_length=64)  # which audit or suggestion (its time and seed)
    drawn: datetime = Field(default_factory=utcnow)


class PendingGoldMark(SQLModel, table=True):
    """A gold mark waiting for its task's assignment to end (``labelq gold mark`` of a task
    assigned right now, or an answer on the review page): the applier or the reaper applies
    it once the task has no live lease (:func:`labelq.live.goldmark.apply_queued_marks`),
    deleting the row in the transaction that marks the task, so it is applied exactly once.
    ``kind`` None: the task's default kind when applied (:func:`labelq.record.golddraw.
    mark_kind`). A new table: ``labelq init`` creates it in an older database."""

    __tablename__ = "pending_gold_mark"
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    task_id: int = Field(foreign_key="task.id", unique=True)
    answer: str = Field(max_length=200)
    kind: str | None = Field(default=None, max_length=16)
    source: str | None = Field(default=None, max_length=500)  # the file, or "review NAME"
    queued: datetime = Field(default_factory=utcnow)


class Reviewer(SQLModel, table=True):
    """An expert who answers on the review page (``labelq reviewers add``): a token that can
    only review (``/review``), stored as its sha256 as annotators' are; ``projects`` the
    projects it may review (empty: every project). A new table: ``labelq init`` creates
    it in an older database."""

    __tablename__ = "reviewer"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    token_hash: str = Field(index=True, max_length=128)
    projects: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created: datetime = Field(default_factory=utcnow)


class Worker(SQLModel, table=True):
    """An annotator's enrolment in one project: the project's cost, capacity, categories,
    status (pauses) and ``seq`` (the policies' index) are per project. A *person* is the
    handle: one person enrolled in several projects has a row in each, all with the same
    ``handle`` and ``token_hash`` (one token signs in to all of them; ``labelq workers
    enroll`` of an existing handle copies it, ``reset-token`` changes every row). A handle
    is unique within a project (``uq_worker_project_handle``); ``ix_worker_handle`` was
    unique across projects before issue 43 (``labelq init`` relaxes it:
    :data:`labelq.record.db.RELAXED_UNIQUE`). ``preferred``: the project the operator set
    as the person's default (``labelq workers default``), where a client that names no
    project works."""

    __table_args__ = (UniqueConstraint("project_id", "seq", name="uq_worker_seq"),
                      Index("uq_worker_project_handle", "project_id", "handle", unique=True))
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    seq: int
    handle: str = Field(index=True, max_length=200)
    cost: float = 1.0
    capacity: int | None = None
    status: str = Field(default="active", max_length=16)
    token_hash: str = Field(index=True, max_length=128)
    categories: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created: datetime = Field(default_factory=utcnow)
    # added by issue 43 (labelq.record.db.ADDED_COLUMNS): True on the one row of a person
    # the operator made their default project; NULL or False elsewhere
    preferred: bool | None = None


class PauseEvent(SQLModel, table=True):
    """One pause of an annotator and why (issue 41; :mod:`labelq.record.pauses`): ``rule``
    ``quality`` (the project's quality rule, on gold) or ``operator`` (``workers pause``, the
    API, the dashboard); for ``quality`` the gold answers right and answered when it fired
    and the test's ``statistic``, its ``value`` and the ``bound`` it crossed. A new table:
    ``labelq init`` creates it in an older database."""

    __tablename__ = "pause_event"
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    at: datetime = Field(default_factory=utcnow)
    rule: str = Field(max_length=16)
    gold_right: int | None = None
    gold_answered: int | None = None
    statistic: str | None = Field(default=None, max_length=32)
    value: float | None = None
    bound: float | None = None
    category: str | None = Field(default=None, max_length=200)


class Assignment(SQLModel, table=True):
    # ix_assignment_gold: the gold questions each annotator was given (status's gold
    # warnings) as a range of a partial index, not a scan of the project's assignments
    __table_args__ = (Index("ix_assignment_worker_state", "worker_id", "state"),
                      Index("ix_assignment_gold", "project_id", "worker_id", "task_id",
                            sqlite_where=text("is_gold = 1"),
                            postgresql_where=text("is_gold")))
    id: str = Field(primary_key=True, max_length=40)
    project_id: int = Field(foreign_key="project.id", index=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    worker_id: int = Field(foreign_key="worker.id")
    is_gold: bool = False
    issued: datetime = Field(default_factory=utcnow)
    expires: datetime
    state: str = Field(default="issued", max_length=16)


class Label(SQLModel, table=True):
    # ix_label_project_applied: a project's labels applied after a sequence number, in
    # applied order (every state catch-up), and its unapplied ones (the applier's batch),
    # as an index range; by (project_id, task_id) alone SQLite scanned and sorted every
    # label of the project for each (labelq.record.db.ADDED_INDEXES adds it to older databases)
    __table_args__ = (Index("ix_label_project_task", "project_id", "task_id"),
                      Index("ix_label_project_applied", "project_id", "applied_seq"))
    id: int | None = Field(default=None, primary_key=True)
    assignment_id: str = Field(foreign_key="assignment.id", unique=True, max_length=40)
    project_id: int = Field(foreign_key="project.id")
    task_id: int = Field(foreign_key="task.id")
    worker_id: int = Field(foreign_key="worker.id", index=True)
    value: str = Field(max_length=200)
    is_gold: bool = False
    received: datetime = Field(default_factory=utcnow)
    # Order in which the hot posterior applied this label (set by the applier; NULL until
    # applied). Rebuilding the posterior folds the labels in this order.
    applied_seq: int | None = Field(default=None, index=True)
    # given with a model's answer shown on the page (issue 42, ``show_suggestions``): the
    # worker model does not take it as independent evidence where it agrees (docs/models.md);
    # NULL (labels of before the column, or none shown) is False
    suggested: bool | None = None


class ModelVersion(SQLModel, table=True):
    """One load of a model's predictions into a project (``labelq predictions load``):
    loading again under the same name makes the next version, a source of its own
    (``name@vN``). ``labels`` is the project's label set at load, the order of the
    probabilities of its :class:`Prediction` rows."""

    __tablename__ = "model_version"
    __table_args__ = (UniqueConstraint("project_id", "name", "version",
                                       name="uq_model_version"),)
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id")
    name: str = Field(max_length=64)
    version: int
    created: datetime = Field(default_factory=utcnow)
    n_rows: int = 0
    labels: list[str] = Field(sa_column=Column(JSON, nullable=False))


class Prediction(SQLModel, table=True):
    """A model version's class probabilities for one task: ``probs`` holds them as
    little-endian float32 (4 bytes a class, in the version's label-set order; see
    :func:`labelq.record.predictions.read_predictions`)."""

    # ix_prediction_task: deleting a project's tasks checks this table's foreign key per
    # task (PostgreSQL scans a table without an index on it)
    __table_args__ = (Index("ix_prediction_task", "task_id"),)
    version_id: int = Field(foreign_key="model_version.id", primary_key=True)
    task_id: int = Field(foreign_key="task.id", primary_key=True)
    probs: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class SavedState(SQLModel, table=True):
    """A project's folded policy state kept in SQL, so that it outlives Redis (issue 44):
    the applier's snapshot (``body``: :func:`labelq.live.hotstate.encode_snapshot`'s bytes)
    at applied sequence ``applied_seq``, written at a bounded rate by the applier and by a
    rebuild (:mod:`labelq.live.saved`). A rebuild after Redis was lost loads it and folds
    only the labels applied after it; it is used only while everything it was folded from
    is unchanged: ``n_applied`` labels with ``applied_seq <= applied_seq`` (none deleted),
    the gold questions and answers (``gold``: their digest), ``n_tasks`` tasks, the same
    project (``identity``), labelq ``version`` and snapshot ``format``, and ``body`` as
    written (``digest``). Else it is ignored and the state folded from the labels."""

    __tablename__ = "saved_state"
    project_id: int = Field(primary_key=True)
    applied_seq: int
    n_applied: int
    n_tasks: int
    gold: str = Field(max_length=64)
    identity: str = Field(max_length=300)
    version: str = Field(max_length=32)
    format: str = Field(max_length=32)
    digest: str = Field(max_length=64)
    written: datetime = Field(default_factory=utcnow)
    body: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class StatusTally(SQLModel, table=True):
    """How far a project's status counters (``task_tally``, ``worker_tally``) are folded:
    every label with ``applied_seq <= applied_seq`` and every task with ``seq < n_tasks``
    (labelq/record/tally.py; rebuildable from the labels, like the hot state)."""

    __tablename__ = "status_tally"
    project_id: int = Field(primary_key=True)
    applied_seq: int = 0
    n_tasks: int = 0
    # the counters' layout (labelq.record.tally.VERSION); NULL: counters of an earlier
    # labelq, folded again from the labels (added by labelq.record.db.ADDED_COLUMNS)
    version: int | None = None


class TaskTally(SQLModel, table=True):
    """Tasks of a project's category by their number of folded labels: every task but the
    gold questions loaded as gold (:class:`GoldTally`); those made gold later (``labelq
    gold mark``) stay here, and status moves them to gold when it reads."""

    __tablename__ = "task_tally"
    project_id: int = Field(primary_key=True)
    category: str = Field(primary_key=True, max_length=200)
    n_labels: int = Field(primary_key=True)
    tasks: int = 0


class GoldTally(SQLModel, table=True):
    """A project's gold questions loaded as gold, per category (their state never changes,
    whatever their labels)."""

    __tablename__ = "gold_tally"
    project_id: int = Field(primary_key=True)
    category: str = Field(primary_key=True, max_length=200)
    tasks: int = 0


class WorkerTally(SQLModel, table=True):
    """An annotator's folded labels, and those answering gold questions loaded as gold (the
    answers to tasks made gold later are read when status is)."""

    __tablename__ = "worker_tally"
    worker_id: int = Field(primary_key=True)
    project_id: int = Field(index=True)
    labels: int = 0
    gold: int = 0


class EndedTally(SQLModel, table=True):
    """Assignments ended without a label (declined, expired) per annotator and state, kept
    by triggers on ``assignment`` (:func:`install_ended_tally`): status reads a row per
    annotator instead of counting every such assignment."""

    __tablename__ = "ended_tally"
    worker_id: int = Field(primary_key=True)
    state: str = Field(primary_key=True, max_length=16)
    n: int = 0


_ENDED = "('declined', 'expired')"
_SQLITE_TRIGGERS = {
    "tr_ended_insert": f"""CREATE TRIGGER tr_ended_insert AFTER INSERT ON assignment
        WHEN NEW.state IN {_ENDED} BEGIN
        INSERT INTO ended_tally (worker_id, state, n) VALUES (NEW.worker_id, NEW.state, 1)
        ON CONFLICT (worker_id, state) DO UPDATE SET n = n + 1; END""",
    "tr_ended_leave": f"""CREATE TRIGGER tr_ended_leave AFTER UPDATE OF state, worker_id
        ON assignment WHEN OLD.state IN {_ENDED} BEGIN
        UPDATE ended_tally SET n = n - 1 WHERE worker_id = OLD.worker_id
        AND state = OLD.state; END""",
    "tr_ended_enter": f"""CREATE TRIGGER tr_ended_enter AFTER UPDATE OF state, worker_id
        ON assignment WHEN NEW.state IN {_ENDED} BEGIN
        INSERT INTO ended_tally (worker_id, state, n) VALUES (NEW.worker_id, NEW.state, 1)
        ON CONFLICT (worker_id, state) DO UPDATE SET n = n + 1; END""",
    "tr_ended_delete": f"""CREATE TRIGGER tr_ended_delete AFTER DELETE ON assignment
        WHEN OLD.state IN {_ENDED} BEGIN
        UPDATE ended_tally SET n = n - 1 WHERE worker_id = OLD.worker_id
        AND state = OLD.state; END""",
}
_PG_FUNCTION = f"""CREATE OR REPLACE FUNCTION labelq_ended_tally() RETURNS trigger AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN {_ENDED} THEN
    UPDATE ended_tally SET n = n - 1 WHERE worker_id = OLD.worker_id AND state = OLD.state;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.state IN {_ENDED} THEN
    INSERT INTO ended_tally (worker_id, state, n) VALUES (NEW.worker_id, NEW.state, 1)
    ON CONFLICT (worker_id, state) DO UPDATE SET n = ended_tally.n + 1;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql"""
_PG_TRIGGER = """CREATE TRIGGER tr_ended_tally AFTER INSERT OR UPDATE OF state, worker_id
    OR DELETE ON assignment FOR EACH ROW EXECUTE FUNCTION labelq_ended_tally()"""


def install_ended_tally(conn: Connection) -> bool:
    """The triggers that keep ``ended_tally``, and its counts from the assignments, where
    the database lacks them (a new database, or one of an earlier labelq: ``labelq init``
    runs this after creating the tables); True if it installed them. Counted and
    installed in one transaction that holds off writers of ``assignment`` (PostgreSQL:
    a lock; SQLite: its one writer), so no assignment is counted twice or missed."""
    if conn.dialect.name == "postgresql":
        if conn.exec_driver_sql("SELECT 1 FROM pg_trigger WHERE tgname = 'tr_ended_tally' "
                                "AND tgrelid = 'assignment'::regclass").first():
            return False
        conn.exec_driver_sql("LOCK TABLE assignment IN SHARE ROW EXCLUSIVE MODE")
        conn.exec_driver_sql(_PG_FUNCTION)
        conn.exec_driver_sql(_PG_TRIGGER)
    elif conn.dialect.name == "sqlite":
        have = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'assignment'")}
        if set(_SQLITE_TRIGGERS) <= have:
            return False
        conn.exec_driver_sql("DELETE FROM ended_tally")  # (the write that holds writers off)
        for name, ddl in _SQLITE_TRIGGERS.items():
            if name not in have:
                conn.exec_driver_sql(ddl)
    else:
        return False
    conn.exec_driver_sql("DELETE FROM ended_tally")
    conn.exec_driver_sql(f"INSERT INTO ended_tally (worker_id, state, n) SELECT worker_id, "
                         f"state, count(*) FROM assignment WHERE state IN {_ENDED} "
                         f"GROUP BY worker_id, state")
    return True


@event.listens_for(SQLModel.metadata, "after_create")
def _after_create(_metadata: object, connection: Connection, **_: object) -> None:
    """``create_all`` (``labelq init``): the ended tally's triggers, on every database."""
    if "ended_tally" in SQLModel.metadata.tables:
        install_ended_tally(connection)


class DashboardFigures(SQLModel, table=True):
    """The dashboard's heavy figures of a project (agreement, the accuracy estimate and its
    curve, gold per annotator, throughput, gold suggestions), computed in the background
    (the beat's ``labelq.figures``, labelq/dashboard.py) and served with their age."""

    __tablename__ = "dashboard_figures"
    project_id: int = Field(primary_key=True)
    computed: datetime | None = None      # when the figures were computed
    took_s: float = 0.0                   # how long that took
    labels: int = 0                       # labels they saw
    key: str = Field(default="", max_length=500)  # what they were computed from
    body: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    claimed: datetime | None = None       # a computation in progress since then


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


class Hook(SQLModel, table=True):
    """A webhook of a project (issue 43; :mod:`labelq.record.hooks`): ``url`` (http or
    https) receives the ``events`` named (a JSON list), each body signed with ``secret``
    (HMAC-SHA256 of ``<timestamp>.<body>``, ``X-Labelq-Signature``). ``budget_below``:
    the share of the budget left under which ``budget.below`` fires; ``fired``: the conditions (``project.finished``,
    ``project.stalled``, ``budget.below``, ``gold.seen_through:HANDLE``) announced and
    still holding, so each is sent once per onset. A new table: ``labelq init`` creates
    it in an older database."""

    __tablename__ = "hook"
    __table_args__ = (UniqueConstraint("project_id", "name", name="uq_hook_project_name"),)
    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    name: str = Field(max_length=100)
    url: str = Field(max_length=2000)
    events: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    secret: str = Field(max_length=128)
    budget_below: float | None = None
    fired: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created: datetime = Field(default_factory=utcnow)


class HookEvent(SQLModel, table=True):
    """One event for one hook: the outbox (written in the transaction of the change it
    reports, where there is one) and its delivery state. ``id`` is the event id the
    receiver de-duplicates on (``X-Labelq-Delivery``); ``state`` ``pending`` (``next_at``:
    when it is due, pushed ahead while a delivery is enqueued), ``delivered`` or ``failed``
    (every try spent)."""

    __tablename__ = "hook_event"
    __table_args__ = (Index("ix_hook_event_due", "state", "next_at"),)
    id: str = Field(primary_key=True, max_length=36)
    hook_id: int = Field(foreign_key="hook.id", index=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    type: str = Field(max_length=64)
    payload: dict[str, Any] = Field(default_factory=dict,
                                    sa_column=Column(JSON, nullable=False))
    created: datetime = Field(default_factory=utcnow)
    state: str = Field(default="pending", max_length=16)
    attempts: int = 0
    next_at: datetime = Field(default_factory=utcnow)
    # the latest claim's token (labelq.hooks.claim_due): a delivery message carrying an
    # older one (it waited in the queue past its claim, and was enqueued again) does nothing
    claim: str | None = Field(default=None, max_length=36)


class HookDelivery(SQLModel, table=True):
    """One attempt to deliver a :class:`HookEvent`: the receiver's HTTP ``status`` (None:
    no answer) or the ``error``, how long it took, and which ``attempt`` it was."""

    __tablename__ = "hook_delivery"
    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(foreign_key="hook_event.id", index=True, max_length=36)
    hook_id: int = Field(foreign_key="hook.id", index=True)
    attempt: int
    status: int | None = None
    error: str | None = Field(default=None, max_length=2000)
    duration_ms: float = 0.0
    at: datetime = Field(default_factory=utcnow)


__all__ += ["Hook", "HookEvent", "HookDelivery"]
