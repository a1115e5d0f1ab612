"""The policy state of a project, kept hot: in-process cache, Redis snapshot, SQL fold.

The state at applied sequence ``s`` is, by definition, the fold of ``policy.update`` over the
project's labels with ``applied_seq <= s`` in that order, starting from ``init_state``. Any
holder can therefore catch up from whatever base it has — its own cache, the Redis snapshot
(``state`` + ``state_seq``), without one the state kept in SQL (:mod:`.saved`, where it
holds), or nothing — by replaying from SQL the labels applied after the base. A snapshot
is only ever a shortcut; SQL decides.

A :class:`StateCache` is per process and thread-safe; both the applier (Celery) and the
service (deciding the next task) use one. The cache is dropped when the project's shape
changes (tasks loaded, workers enrolled), and the fold restarts from SQL. Each catch-up also
re-reads the project row, so ``labelq project update`` (budget, label cap, gold schedule,
quality rule) reaches running processes; a budget-aware policy, whose state copies the
budget and the cap from its problem, is then folded again from SQL under the new ones.
A model's predictions (issue 42) are part of the view: the latest version of each model,
read with it; a predictions load or remove bumps the epoch, and each catch-up also compares
the latest versions in SQL with the state's (a load made without Redis), so every holder
folds again with the new ones, and a snapshot made under other versions is not used.

Declines are applied by the applier from the ``declines`` list and are not replayed from SQL
(see docs/architecture.md): only policies that learn from declines notice the difference.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import orjson
from sqlalchemy import bindparam, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

import labelq as _package

from ..policies import build
from ..policies.base import Policy
from ..record.db import database_id, session_scope
from ..record.models import Label, Project, SavedState, Task, Worker
from ..record.problem import (
    ProjectView,
    count_workers,
    gc_paused,
    label_rows,
    load_view,
    max_applied,
    model_sources,
    project_predictions,
    to_observation,
)
from ..record.secret import assignment_key
from . import snapshot as binary
from .leaseid import IdSigner
from .redis.keys import Keys

__all__ = ["Hot", "StateCache", "encode_snapshot", "decode_snapshot", "write_snapshot",
           "fold_from_sql", "bump_epoch"]

log = logging.getLogger(__name__)


@dataclass
class Hot:
    """One project's cached view, policy and state at applied sequence ``seq``."""

    view: ProjectView
    policy: Policy
    state: Any
    seq: int
    checked: float = 0.0  # monotonic time of the last catch-up with SQL
    lock: threading.RLock = field(default_factory=threading.RLock)
    # task -> the last applied seq that changed its priority through a replay from SQL
    # (labels another process applied — e.g. an applier killed before it pushed their
    # priorities); only tracked when the cache is asked to (the applier's), which pushes
    # those beyond ``pushed_seq`` and clears them
    dirty: dict[int, int] | None = None
    # task seq -> JSON row [external id, category, payload] of tasks this process put in
    # inboxes (tasks do not change once loaded; this goes with the view on a reload)
    rows: dict[int, str] = field(default_factory=dict)
    # ``meta`` epoch this state was folded under: a corrected gold answer bumps it, and
    # every holder then folds again from SQL (the history's gold truths changed)
    epoch: int = 0
    # held by the one catch-up with SQL running on this state (its reads run outside
    # ``lock``, which it takes only to fold the rows in); ``refreshing``: a catch-up
    # ahead of time is running in the background (``StateCache.get``'s ``refresh_after``)
    catching_up: threading.Lock = field(default_factory=threading.Lock)
    refreshing: bool = False
    # the tasks a model settled alone were synced with ``pending`` since this state was
    # folded (labelq.live.modelsettled: the applier syncs a fresh state's at once)
    settled_synced: bool = False
    # the identity of the SQL database the state was folded from (its Redis keys' prefix)
    database: str = ""
    # makes the assignment ids of that database (keyed with its secret)
    signer: IdSigner | None = None

    @property
    def project(self) -> Project:
        return self.view.project

    @property
    def project_id(self) -> int:
        pid = self.view.project.id
        assert pid is not None  # a stored project
        return pid

    @property
    def keys(self) -> Keys:
        """The project's Redis keys (in its database's namespace)."""
        return Keys(self.project_id, self.database)


def _limits(project: Project) -> list[Any]:
    """The project settings a policy's problem copies (``ProjectView.problem``)."""
    return [project.budget, project.max_labels]


def _settings(project: Project) -> tuple[Any, ...]:
    return (project.name, project.created, project.budget, project.max_labels,
            project.aggregation, project.gold_schedule, project.quality, project.policy,
            project.labels)


def encode_snapshot(hot: Hot) -> bytes:
    """The snapshot of ``hot``: binary (:mod:`.snapshot`), with the view's task arrays,
    so that a process's load reads them back with no O(tasks) Python work and no task
    rows from SQL; zlib JSON for a state the binary form does not take."""
    envelope = {"dims": list(hot.view.dims), "seq": hot.seq, "limits": _limits(hot.project),
                "epoch": hot.epoch, "policy": hot.project.policy,
                "models": sorted(hot.view.predictions or ()),
                "state_version": hot.policy.state_version}
    with gc_paused():
        view = hot.view
        try:
            return binary.encode({
                **envelope, "labels": list(hot.project.labels),
                "project": _identity(hot.project),
                "state": _state_tree(hot.policy, hot.state),
                "view": {"categories": list(view.categories),
                         "task_category": view.task_category, "is_gold": view.is_gold,
                         "gold_answer": view.gold_answer, "task_id": view.task_id}})
        except (binary.NotBinary, TypeError):
            pass
        data = {**envelope, "state": hot.policy.state_to_dict(hot.state)}
        return zlib.compress(_json(data), 1)


def _state_tree(policy: Policy, state: Any) -> Any:
    """What ``policy.state_to_dict`` gives, but numpy arrays kept as arrays where that is
    the base class's (which only turns them into lists: the policy's ``state_from_dict``
    reads arrays as it reads lists — tests/live/test_cold_start.py checks every policy)."""
    if type(policy).state_to_dict is Policy.state_to_dict and hasattr(state, "__dict__"):
        return dict(vars(state))
    return policy.state_to_dict(state)


_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


_FAST = b'{"fast":1,'  # how a snapshot orjson may read back exactly begins


def _json(data: dict[str, Any]) -> bytes:
    """``data`` (the snapshot: a small envelope and the policy's ``state``) as JSON:
    orjson (1M tasks' state: a tenth of a second, where ``json.dumps`` took about two,
    every snapshot of the applier), marked ``"fast": 1`` up front; else the standard
    library — for a state orjson does not take (an integer beyond 64 bits, which orjson
    would also read back as a float), and for one with a ``null`` in it, since orjson
    writes NaN and infinities as ``null`` where ``json`` writes ``NaN`` and ``Infinity``,
    which read back as they were. Readers ignore the mark."""
    envelope = {k: v for k, v in data.items() if k != "state"}
    try:
        state = orjson.dumps(data["state"], default=binary.json_default, option=_ORJSON)
        head = orjson.dumps({"fast": 1, **envelope}, default=binary.json_default, option=_ORJSON)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        state = b"null"
    if b"null" in state:
        return json.dumps(data, separators=(",", ":"), default=binary.json_default).encode()
    return head[:-1] + b',"state":' + state + b"}"


def decode_snapshot(blob: bytes) -> dict[str, Any]:
    """The envelope and ``"state"`` (for ``state_from_dict``: numpy arrays where the
    binary form kept them); a binary snapshot also has ``"labels"`` and ``"view"``."""
    if binary.is_binary(blob):
        return binary.decode(blob)
    raw = zlib.decompress(blob)
    # orjson (a fifth of json.loads' time) for what _json wrote with it; anything else
    # (NaN, big integers, an older writer's snapshot) the standard library reads as written
    data: dict[str, Any] = orjson.loads(raw) if raw.startswith(_FAST) else json.loads(raw)
    return data


def write_snapshot(redis: Any, hot: Hot, pipeline: Any = None) -> bytes:
    """Write the snapshot of ``hot`` to Redis; returns its bytes (which the applier and a
    rebuild also keep in SQL: :mod:`.saved`)."""
    k = hot.keys
    pipe = pipeline or redis.pipeline(transaction=True)
    blob = encode_snapshot(hot)
    pipe.set(k.state, blob)
    pipe.set(k.state_seq, hot.seq)
    if pipeline is None:
        pipe.execute()
    return blob


def _replay(session: Session, hot: Hot, upto: int | None = None) -> int:
    """Fold the labels applied after ``hot.seq`` into the state; returns how many. The
    rows are read outside ``hot.lock`` (a decision meanwhile is not held up by the SQL
    read) and folded under it; a row the applier of this process folded meanwhile (under
    the lock, moving ``hot.seq``) is skipped."""
    idx = {v: i for i, v in enumerate(hot.project.labels)}
    n = 0
    while True:
        rows = label_rows(session, hot.project_id, applied_after=hot.seq, limit=20000)
        if not rows:
            return n
        with hot.lock:
            for row in rows:
                if row[1] <= hot.seq:
                    continue
                if upto is not None and row[1] > upto:
                    return n
                touched = hot.policy.update(hot.state, to_observation(row, idx))
                if hot.dirty is not None:
                    hot.dirty.update((int(t), int(row[1])) for t in touched)
                hot.seq = int(row[1])
                n += 1


def fold_from_sql(session: Session, project: Project, *, unapplied: bool = False) -> Hot:
    """A fresh fold of every applied label (the reference the tests compare against); with
    ``unapplied``, then of the labels the applier has not folded yet, in the order it will
    take them (by id), so the result counts every label durable in SQL."""
    view = load_view(session, project)
    policy = build(project.policy)
    hot = Hot(view, policy, policy.init_state(view.problem()), 0,
              database=database_id(session), signer=IdSigner(assignment_key(session)))
    _replay(session, hot)
    if unapplied:
        idx = {v: i for i, v in enumerate(project.labels)}
        for row in label_rows(session, hot.project_id, unapplied=True):
            policy.update(hot.state, to_observation(row, idx))
    return hot


class StateCache:
    """Per-process cache of :class:`Hot` by project id.

    ``get(engine, redis, project_id, max_age=s)`` returns the cached state if it caught up
    with SQL less than ``s`` seconds ago, else catches up first (replaying newly applied
    labels). The caller must hold ``hot.lock`` while reading or updating ``hot.state``.
    """

    def __init__(self, track_dirty: bool = False) -> None:
        self._items: dict[int, Hot] = {}
        self._lock = threading.Lock()
        self._loading: dict[int, threading.Lock] = {}  # project -> held while loading it
        self.track_dirty = track_dirty

    def drop(self, project_id: int) -> None:
        with self._lock:
            self._items.pop(int(project_id), None)

    def peek(self, project_id: int) -> Hot | None:
        return self._items.get(int(project_id))

    def put(self, hot: Hot) -> None:
        """Hold ``hot``, a state caught up with SQL just now elsewhere (a rebuild's, which
        wrote its snapshot: the first request after it loads nothing)."""
        hot.checked = time.monotonic()
        if self.track_dirty and hot.dirty is None:
            hot.dirty = {}
        with self._lock:
            self._items[int(hot.project_id)] = hot

    def get(self, engine: Engine, redis: Any, project_id: int, *,
            max_age: float = 0.0, refresh_after: float | None = None) -> Hot:
        """``refresh_after`` (below ``max_age``): a cached state older than that is still
        returned, and caught up in a background thread, so that a steady stream of
        callers finds it fresh and none waits for the catch-up (the state is never older
        than ``max_age`` either way: past it the caller catches up itself)."""
        hot = self._items.get(int(project_id))
        if hot is not None:
            age = time.monotonic() - hot.checked
            if age < max_age:
                if refresh_after is not None and age >= refresh_after and not hot.refreshing:
                    self._refresh(engine, redis, hot)
                return hot
        return self._catch_up(engine, redis, int(project_id), hot)

    def age(self, project_id: int) -> float | None:
        """Seconds since the cached state of the project last caught up with SQL (None:
        not cached)."""
        hot = self._items.get(int(project_id))
        return None if hot is None else time.monotonic() - hot.checked

    def refresh(self, engine: Engine, redis: Any, project_id: int, *, after: float) -> None:
        """Catch the cached state up in a background thread if it is ``after`` seconds
        old or more (nothing when none is cached or a catch-up is running)."""
        hot = self._items.get(int(project_id))
        if hot is not None and not hot.refreshing and \
                time.monotonic() - hot.checked >= after:
            self._refresh(engine, redis, hot)

    def _refresh(self, engine: Engine, redis: Any, hot: Hot) -> None:
        hot.refreshing = True

        def run() -> None:
            try:
                self._catch_up(engine, redis, hot.project_id, hot)
            except Exception:  # noqa: BLE001 - a caller past max_age catches up itself
                pass
            finally:
                hot.refreshing = False
        threading.Thread(target=run, name="labelq-state-refresh", daemon=True).start()

    def _catch_up(self, engine: Engine, redis: Any, project_id: int, hot: Hot | None) -> Hot:
        if hot is not None:
            with session_scope(engine) as session:
                if self._follow(session, redis, project_id, hot):
                    return hot
        # a (re)load, one at a time per project: a thread that finds another loading waits
        # for it and follows its state rather than load the same O(tasks) state again (an
        # applier's task and the background warmer, :mod:`.warm`; two requests of an API
        # process)
        with self._loader(project_id):
            current = self._items.get(project_id)
            with session_scope(engine) as session:
                if current is not None and current is not hot and \
                        self._follow(session, redis, project_id, current):
                    return current  # loaded by another thread meanwhile
                hot = self._load(session, redis, project_id)
                hot.checked = time.monotonic()
            with self._lock:
                self._items[project_id] = hot
            return hot

    def _loader(self, project_id: int) -> threading.Lock:
        with self._lock:
            return self._loading.setdefault(project_id, threading.Lock())

    def _follow(self, session: Session, redis: Any, project_id: int, hot: Hot) -> bool:
        """Catch ``hot`` up with SQL (replay the labels applied since); False when the
        project's shape, epoch, problem or models (a predictions load or remove: the latest
        versions differ from the state's) changed and the state must be loaded again."""
        with hot.catching_up:
            n_tasks, epoch = _meta(redis, session, project_id)
            if count_workers(session, project_id) == hot.view.n_workers and \
                    n_tasks == hot.view.n_tasks and epoch == hot.epoch and \
                    self._same_problem(session, hot) and \
                    model_sources(session, hot.project) == sorted(hot.view.predictions or ()):
                _replay(session, hot)
                hot.checked = time.monotonic()
                return True
        return False

    @staticmethod
    def _same_problem(session: Session, hot: Hot) -> bool:
        """Re-read the project row. Changed settings replace the view's project; False
        when they change the problem a budget-aware policy's state was made from (then the
        state is folded again)."""
        fresh = session.get(Project, hot.project.id)
        if fresh is None or _settings(fresh) == _settings(hot.project):
            return True
        session.expunge(fresh)
        if (fresh.name, fresh.created) != (hot.project.name, hot.project.created):
            return False  # another project under a deleted one's id (SQLite reuses ids)
        if hot.policy.budget_aware and _limits(fresh) != _limits(hot.project):
            return False
        hot.view = replace(hot.view, project=fresh)
        return True

    def _load(self, session: Session, redis: Any, project_id: int) -> Hot:
        project = session.get(Project, project_id)
        if project is None:
            from ..errors import NotFound
            raise NotFound(f"no project with id {project_id}", project_id=project_id)
        session.expunge(project)
        database = database_id(session)
        # the epoch before what it guards is read (the snapshot, the tasks' gold): a gold
        # answer marked or corrected meanwhile then shows as a newer epoch than this
        # state's, and the state is loaded again
        epoch = _meta(redis, session, project_id)[1]
        policy = build(project.policy)
        snap = None
        blob = redis.get(Keys(project_id, database).state) if redis is not None else None
        if blob:
            try:
                with gc_paused():
                    snap = decode_snapshot(blob)
            except Exception:  # noqa: BLE001 - a snapshot it cannot read (damaged, or
                # another version's layout) is only a shortcut missed: fold from SQL
                log.warning("project %s: unreadable state snapshot ignored", project_id,
                            exc_info=True)
        if snap is not None and snap.get("project", _identity(project)) != _identity(project):
            snap = None  # another project's, under a deleted one's id (SQLite reuses ids)
        view = _snapshot_view(session, project, snap, epoch) if snap is not None else None
        hot = None
        if snap is None:  # no snapshot in Redis (a lazy rebuild writes its own just after
            # the first request, :func:`.rebuild.ensure_hot`; or Redis lost it): the state
            # kept in SQL where it holds (:mod:`.saved`), rather than a fold of every label
            got = load_saved(session, project)
            if got is not None:
                hot, view = got[0], got[0].view
        if view is None:
            view = load_view(session, project)
        if hot is None and snap is not None and tuple(snap["dims"]) == view.dims and \
                snap["policy"] == project.policy and \
                snap["seq"] <= max_applied(session, project_id) and \
                snap.get("epoch", 0) == epoch and \
                snap.get("models", []) == sorted(view.predictions or ()) and \
                (not policy.budget_aware or snap.get("limits") == _limits(project)):
            state = _read_state(policy, snap, f"project {project_id}: state snapshot")
            if state is not None:
                hot = Hot(view, policy, state, int(snap["seq"]))
        del snap
        if hot is None:
            hot = Hot(view, policy, policy.init_state(view.problem()), 0)
        hot.epoch, hot.database = epoch, database
        hot.signer = IdSigner(assignment_key(session))
        if self.track_dirty:
            hot.dirty = {}
        _replay(session, hot)
        return hot


def _read_state(policy: Policy, snap: dict[str, Any], what: str) -> Any:
    """The policy state of the decoded snapshot ``snap``, or None (logged as ``what``) when
    it was written under another layout of the policy's state (``state_version``: a
    snapshot of before one has none, i.e. 1) or the policy cannot read it: such a state is
    folded again from the labels, never read as if it were of this layout."""
    version = snap.get("state_version", 1)
    if version != policy.state_version:
        log.warning("%s of state layout %s, this labelq's %s is %s: folded again from the "
                    "labels", what, version, policy.name, policy.state_version)
        return None
    try:
        with gc_paused():
            return policy.state_from_dict(snap["state"])
    except Exception:  # noqa: BLE001 - only a shortcut missed: fold from SQL
        log.warning("%s unreadable: folded again from the labels", what, exc_info=True)
        return None


def _identity(project: Project) -> list[str]:
    return [project.name, str(project.created)]


def _snapshot_view(session: Session, project: Project, snap: dict[str, Any],
                   epoch: int) -> ProjectView | None:
    """The project's view with its task arrays from a binary snapshot ``snap`` (None when
    it has none or they may differ from SQL's), its workers' from SQL. Tasks never change
    once loaded but by ``labelq gold mark``/``gold correct``, which bump the epoch, and by
    loading more (the count); the label set orders the gold answers."""
    got = snap.get("view")
    if got is None or snap.get("epoch", 0) != epoch or snap.get("labels") != project.labels:
        return None
    assert project.id is not None  # a stored project
    n_tasks = _task_span(session, project.id)
    arrays = [got["task_category"], got["is_gold"], got["gold_answer"], got["task_id"]]
    if snap["dims"][0] != n_tasks or \
            any(not isinstance(a, np.ndarray) or a.shape != (n_tasks,) for a in arrays):
        return None
    workers = session.connection().execute(_WORKERS, {"p": project.id}).all()
    cost = np.array([w[0] for w in workers], dtype=float)
    capacity = np.array([-1 if w[1] is None else w[1] for w in workers], dtype=np.int64)
    return ProjectView(project, list(got["categories"]), arrays[0], arrays[1], arrays[2],
                       cost, capacity, arrays[3], project_predictions(session, project, arrays[3]))


def _meta(redis: Any, session: Session, project_id: int) -> tuple[int, int]:
    """(task count, epoch) as recorded in ``meta`` (one round trip); the count falls back
    to SQL when there is none."""
    if redis is None:
        return _n_tasks(session, project_id), 0
    n, epoch = redis.hmget(Keys(project_id, database_id(session)).meta, "n_tasks", "epoch")
    return (int(n) if n is not None else _n_tasks(session, project_id)), int(epoch or 0)


def bump_epoch(redis: Any, k: Keys) -> int:
    """Make every process fold the project's state (keys ``k``) again from SQL (after a
    gold answer was corrected): a new epoch in ``meta``, and no snapshot of the old one."""
    pipe = redis.pipeline(transaction=True)
    pipe.hincrby(k.meta, "epoch", 1)
    pipe.delete(k.state)
    return int(pipe.execute()[0])


def _n_tasks(session: Session, project_id: int) -> int:
    return int(session.connection().execute(_COUNT_TASKS, {"p": project_id}).scalar_one())


def _task_span(session: Session, project_id: int) -> int:
    """The project's task count as 1 + its highest task seq: the same number (a project's
    tasks are seqs 0..n-1: loads append from the highest, nothing removes one, and the view
    indexes its arrays by seq), read from the end of the (project, seq) index where a count
    reads all of it (1M tasks, PostgreSQL: ~16 ms against ~200 ms, on every state load)."""
    got: int | None = session.connection().execute(_MAX_SEQ, {"p": project_id}).scalar_one()
    return 0 if got is None else int(got) + 1


_MAX_SEQ = select(func.max(col(Task.seq))).where(col(Task.project_id) == bindparam("p"))
_COUNT_TASKS = (select(func.count()).select_from(Task)
                .where(col(Task.project_id) == bindparam("p")))
_WORKERS = (select(col(Worker.cost), col(Worker.capacity))
            .where(col(Worker.project_id) == bindparam("p")).order_by(col(Worker.seq)))


# --- the state kept in SQL (labelq.live.saved writes it; read here, where a process
# without a Redis snapshot loads it) -------------------------------------------------------

#: the labelq version a saved state is written under, checked when it is read (read from
#: the package, not imported by name: ``labelq``'s own names are the app layer's)
SAVED_VERSION: str = _package.__version__
# the layout of ``body`` (the binary snapshot's magic; a zlib-JSON body is marked too)
SAVED_FORMAT = binary.MAGIC.decode()
# (what it logs is labelq.live.saved's, as before the reading moved here)
_saved_log = logging.getLogger("labelq.live.saved")


def _gold(seqs: np.ndarray, answers: np.ndarray, labels: list[str]) -> str:
    h = hashlib.sha256()
    h.update("\x1f".join(labels).encode())
    h.update(np.ascontiguousarray(seqs, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(answers, dtype="<i8").tobytes())
    return h.hexdigest()


def _sql_gold_digest(session: Session, project: Project) -> str:
    """:func:`gold_digest` of the task rows now (the gold ones, through their index
    ``ix_task_project_gold``; sorted here: with ``ORDER BY seq`` SQLite walked the
    ``(project_id, seq)`` index over every task of the project instead, 0.11 s at 400,000
    tasks for no gold question)."""
    rows = session.exec(select(col(Task.seq), col(Task.gold_answer))
                        .where(col(Task.project_id) == project.id, col(Task.is_gold))).all()
    index = {v: i for i, v in enumerate(project.labels)}
    seqs = np.array([int(s) for s, _a in rows], dtype=np.int64)
    answers = np.array([index.get(a, -1) if a is not None else -1 for _s, a in rows],
                       dtype=np.int64)
    order = np.argsort(seqs, kind="stable")
    return _gold(seqs[order], answers[order], list(project.labels))


def n_applied(session: Session, project_id: int, upto: int) -> int:
    """How many of the project's labels were applied at or before ``upto``."""
    return int(session.exec(select(func.count()).select_from(Label).where(
        col(Label.project_id) == project_id, col(Label.applied_seq).is_not(None),
        col(Label.applied_seq) <= upto)).one())


def _identity_text(project: Project) -> str:
    return "\x1f".join(_identity(project))


def load_saved(session: Session, project: Project) -> tuple[Hot, int, int] | None:
    """The project's state from its saved row, caught up with the labels applied since
    (folded here), how many those were and the row's sequence; None when there is no row or it does not
    hold (module docstring: then fold from the labels)."""
    pid = project.id
    assert pid is not None  # a stored project
    started = time.monotonic()
    row = session.get(SavedState, pid)
    if row is None:
        return None

    def refuse(why: str) -> tuple[Hot, int, int] | None:
        _saved_log.warning("project %s: saved state at applied seq %s not used: %s", pid,
                           row.applied_seq, why)
        return None

    policy = build(project.policy)
    if row.identity != _identity_text(project):
        return refuse("another project's (a deleted one's id)")
    if row.version != SAVED_VERSION or row.format not in (SAVED_FORMAT, "zlib-json"):
        return refuse(f"written by labelq {row.version} in format {row.format} "
                      f"(this is {SAVED_VERSION}, {SAVED_FORMAT})")
    n_tasks = _task_span(session, pid)
    if row.n_tasks != n_tasks:
        return refuse(f"{row.n_tasks} tasks, the project has {n_tasks}")
    if row.gold != _sql_gold_digest(session, project):
        return refuse("gold questions or answers changed since (gold mark, gold correct)")
    applied = n_applied(session, pid, row.applied_seq)
    if applied != row.n_applied:
        return refuse(f"{row.n_applied} labels were folded up to it, SQL has {applied} "
                      "(labels deleted?)")
    blob = bytes(row.body)
    if hashlib.sha256(blob).hexdigest() != row.digest:
        return refuse("damaged (its bytes do not match their digest)")
    try:
        with gc_paused():
            snap = decode_snapshot(blob)
            del blob
            if snap.get("project", _identity(project)) != _identity(project) or \
                    int(snap["seq"]) != row.applied_seq:
                return refuse("its snapshot is not the row's")
            if snap["policy"] != project.policy or \
                    (policy.budget_aware and snap.get("limits") != _limits(project)):
                return refuse("made under another policy spec, budget or cap")
            view = _snapshot_view(session, project, snap, snap.get("epoch", 0))
            if view is None:
                view = load_view(session, project)
            if tuple(snap["dims"]) != view.dims:
                return refuse(f"its dimensions {tuple(snap['dims'])} are not the "
                              f"project's {view.dims} (annotators enrolled since)")
            if snap.get("models", []) != sorted(view.predictions or ()):
                # (a predictions load or remove since: the state was folded with other models)
                return refuse(f"folded with the models {snap.get('models', [])}, the latest "
                              f"in SQL are {sorted(view.predictions or ())}")
            if snap.get("state_version", 1) != policy.state_version:
                return refuse(f"its {policy.name} state is of layout "
                              f"{snap.get('state_version', 1)}, this labelq's is "
                              f"{policy.state_version}")
            state = policy.state_from_dict(snap["state"])
    except Exception as exc:  # noqa: BLE001 - an unreadable row is only a shortcut missed
        _saved_log.warning("project %s: saved state unreadable, folded from the labels: %r",
                           pid, exc)
        return None
    hot = Hot(view, policy, state, row.applied_seq, database=database_id(session))
    folded = _replay(session, hot)
    _saved_log.info("project %s: saved state at applied seq %s loaded, %s later labels "
                    "folded (%.2f s)", pid, row.applied_seq, folded, time.monotonic() - started)
    return hot, folded, row.applied_seq
