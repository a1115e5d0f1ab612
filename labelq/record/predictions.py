"""A model's predictions, loaded as one more source (issue 42): in, listed, removed, read.

A predictions file is CSV or JSONL, one row per task, in one of two layouts:

* ``id`` and ``p_<class>`` for every class of the project's label set: the model's
  probability of each class (e.g. ``id,p_pos,p_neg``);
* ``id``, ``label`` and ``score``: the model's answer and its probability; the rest
  (``1 - score``) is spread evenly over the other classes.

It is read by the one strict reader (:mod:`labelq.record.reading`) and refused whole,
with a :class:`~labelq.errors.FileFormatError` (exit code 3) naming the file, the line
and the field, before anything is written, for: a missing ``id``, an id that is not a
task of the project, a duplicate id, a missing class column (or key), a column of a class
not in the label set (or any other column), an unknown ``label``, a probability that is
not a number, ``NaN``, negative or over 1, and a row whose probabilities do not sum to 1
within :data:`SUM_TOLERANCE` — unless ``normalise``, which divides such a row by its sum
and counts the rows it changed (a row summing to 0 is still refused).

Loading streams: each batch of checked rows goes into a temporary table of the caller's
transaction (``line, id, probabilities``); the ids are then checked against the project's
tasks, and for duplicates, in SQL, and the rows copied into ``prediction`` with one
``INSERT ... SELECT``. Memory does not grow with the file (tests/foundation/
test_predictions_memory.py). Each load of a model is a new :class:`ModelVersion`
(``v1``, ``v2``, ...), a source of its own: a retrained model is not the old one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, delete, func
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from ..errors import Conflict, FileFormatError, InputError, NotFound
from .loading import MAX_ID
from .models import ModelVersion, Prediction, Project, as_utc, utcnow
from .names import check_name
from .reading import PLAIN, check_value, csv_rows, detect_format, name, records

__all__ = ["load_predictions", "PredictionLoad", "VersionInfo", "list_versions",
           "suggestion", "suggestions",
           "remove_predictions", "read_predictions", "source_name", "parse_source",
           "check_model_name", "SUM_TOLERANCE", "DTYPE"]

SUM_TOLERANCE = 1e-6  # how far a row's probabilities may sum from 1
DTYPE = np.dtype("<f4")  # the stored probabilities: little-endian float32
BATCH = 5_000  # rows a batch of the staging insert
STAGE = "labelq_prediction_stage"  # the temporary table of one load


@dataclass(frozen=True)
class PredictionLoad:
    """What a load made: ``model@v{version}`` with ``rows`` predictions, ``normalised`` of
    them divided by their sum."""

    project: str
    model: str
    version: int
    rows: int
    normalised: int

    @property
    def source(self) -> str:
        return source_name(self.model, self.version)

    def as_dict(self) -> dict[str, Any]:
        return {"project": self.project, "model": self.model, "version": self.version,
                "source": self.source, "rows": self.rows, "normalised": self.normalised}


@dataclass(frozen=True)
class VersionInfo:
    model: str
    version: int
    rows: int
    created: datetime

    @property
    def source(self) -> str:
        return source_name(self.model, self.version)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "version": self.version, "source": self.source,
                "rows": self.rows, "created": self.created.isoformat(timespec="seconds")}


def source_name(model: str, version: int) -> str:
    """The name of a model version as a source: ``MODEL@vN``."""
    return f"{model}@v{version}"


def parse_source(source: str) -> tuple[str, int]:
    """``(model, version)`` of a :func:`source_name`."""
    model, sep, v = source.rpartition("@v")
    if not sep or not model or not v.isdigit():
        raise InputError(f"{source!r} is not a model source name (MODEL@vN)", field="source")
    return model, int(v)


def check_model_name(model: str) -> str:
    """A model's name: as a project's (:data:`~labelq.record.names.NAME_PATTERN`),
    without ``@`` (a source is named ``MODEL@vN``)."""
    check_name(model, "model name")
    if "@" in model:
        raise InputError(f"model name {model!r} is not allowed: '@' separates a model's "
                         "name from its version (MODEL@vN)", field="model name")
    return model


# --- reading a file ----------------------------------------------------------------------

class _Layout:
    """How a file gives its rows' probabilities: ``p_<class>`` columns, or ``label`` and
    ``score``."""

    def __init__(self, path: Path, labels: list[str], keys: Sequence[str], text: bool
                 ) -> None:
        self.path, self.labels, self.text = path, labels, text  # text: CSV's values
        self.columns = [f"p_{c}" for c in labels]
        keys = list(keys)
        if "id" not in keys:
            raise FileFormatError(str(path), 1, "id", f"missing column; found {keys}")
        self.scored = "label" in keys or "score" in keys
        expected = ["id", "label", "score"] if self.scored else ["id", *self.columns]
        for key in keys:
            if key in expected:
                continue
            if key.startswith("p_") and not self.scored:
                raise FileFormatError(str(path), 1, key,
                                      f"unknown class {key[2:]!r}: the label set is {labels}")
            raise FileFormatError(str(path), 1, key,
                                  "unexpected column: a predictions file has 'id' and "
                                  "either 'p_<class>' for every class or 'label' and 'score'")
        for key in expected:
            if key not in keys:
                what = (f"missing class column for {key[2:]!r} (the label set is {labels})"
                        if key.startswith("p_") else "missing column")
                raise FileFormatError(str(path), 1, key, f"{what}; found {keys}")
        self.keys = expected
        k = len(labels)
        self.sum_field = "+".join(self.columns) if k <= 4 else \
            f"{self.columns[0]}+...+{self.columns[-1]}"

    def row(self, line: int, values: Sequence[Any], normalise: bool
            ) -> tuple[str, NDArray[np.float32], bool]:
        """``(id, probabilities, normalised)`` of one row's values (in :attr:`keys`' order)."""
        path = self.path
        ext = name(values[0], path, line, "id", required=True, max_length=MAX_ID)
        k = len(self.labels)
        if self.scored:
            label = name(values[1], path, line, "label", required=True, max_length=200)
            if label not in self.labels:
                raise FileFormatError(str(path), line, "label",
                                      f"unknown class {label!r}: the label set is "
                                      f"{self.labels}")
            score = _probability(values[2], path, line, "score", self.text)
            probs = [(1.0 - score) / (k - 1)] * k
            probs[self.labels.index(label)] = score
            return ext, np.array(probs, dtype=DTYPE), False
        probs = [_probability(v, path, line, c, self.text)
                 for v, c in zip(values[1:], self.columns, strict=True)]
        total = math.fsum(probs)
        if abs(total - 1.0) <= SUM_TOLERANCE:
            return ext, np.array(probs, dtype=DTYPE), False
        if not normalise:
            raise FileFormatError(str(path), line, self.sum_field,
                                  f"the probabilities sum to {total:.9g}, not 1 (within "
                                  f"{SUM_TOLERANCE:g}); pass --normalise (API: "
                                  "normalise=true) to divide each such row by its sum")
        if total == 0.0:
            raise FileFormatError(str(path), line, self.sum_field,
                                  "the probabilities are all 0: nothing to normalise")
        return ext, np.array([p / total for p in probs], dtype=DTYPE), True


def _probability(value: Any, path: Path, line: int, field: str, text: bool) -> float:
    """A probability: a number in [0, 1] (in CSV, its text; in JSON a number, not a
    string)."""
    if value is None or value == "":
        raise FileFormatError(str(path), line, field, "missing value")
    if isinstance(value, bool):
        raise FileFormatError(str(path), line, field, "must be a number, got true/false")
    if isinstance(value, str) and text:
        try:
            p = float(value)
        except ValueError:
            raise FileFormatError(str(path), line, field,
                                  f"not a number: {value[:40]!r}") from None
    elif isinstance(value, (int, float)):
        p = float(value)
    else:
        check_value(value, path, line, field)  # NaN, a float or integer out of range
        raise FileFormatError(str(path), line, field,
                              f"must be a number, got {type(value).__name__}")
    if math.isnan(p):
        raise FileFormatError(str(path), line, field, "NaN is not a probability")
    if p < 0:
        raise FileFormatError(str(path), line, field, f"negative probability {p:g}")
    if p > 1:
        raise FileFormatError(str(path), line, field, f"probability {p:g} is over 1")
    return p


_Staged = tuple[int, str, bytes]  # line, id, probabilities


def _csv_rows(path: Path, labels: list[str], normalise: bool, changed: list[int]
              ) -> Iterator[_Staged]:
    """:func:`_rows` of a CSV file, :data:`BATCH` rows at a time: a batch whose ids are
    plain (:data:`~labelq.record.reading.PLAIN`, within their length) and whose values
    numpy reads as probabilities summing to 1 is taken whole (checked as arrays); any
    other batch goes row by row through :meth:`_Layout.row`, which names the first
    problem. An error of the reader (a malformed line) is raised once the rows before it
    are checked, so that the first bad line is the one named."""
    header, rows = csv_rows(path)
    layout = _Layout(path, labels, header, text=True)
    i_id = header.index("id")
    at = [header.index(k) for k in layout.keys[1:]]
    width = len(labels) * DTYPE.itemsize
    reader_error: list[FileFormatError] = []
    source = _until_error(rows, reader_error)
    while chunk := list(islice(source, BATCH)):
        staged = None if layout.scored else _csv_batch(chunk, i_id, at, normalise, changed)
        if staged is not None:
            ids, probs = staged
            blob = probs.tobytes()
            yield from zip([line for line, _row in chunk], ids,
                           [blob[j:j + width] for j in range(0, len(blob), width)],
                           strict=True)
            continue
        for line, row in chunk:
            ext, one, fixed = layout.row(line, [row[i_id], *(row[i] for i in at)], normalise)
            changed[0] += fixed
            yield line, ext, one.tobytes()
    if reader_error:
        raise reader_error[0]


def _csv_batch(chunk: list[tuple[int, list[str]]], i_id: int, at: list[int],
               normalise: bool, changed: list[int]
               ) -> tuple[list[str], NDArray[np.float32]] | None:
    """A batch's ids and probabilities (as stored) if every row of it is good (or only
    needs normalising, with ``normalise``); else None (the caller names the problem)."""
    ids = [row[i_id] for _line, row in chunk]
    if max(map(len, ids)) > MAX_ID or not all(map(PLAIN.fullmatch, ids)):
        return None
    try:
        probs = np.array([[row[i] for i in at] for _line, row in chunk], dtype=np.float64)
    except ValueError:  # an empty value or one that is not a number
        return None
    if not (probs >= 0).all() or not (probs <= 1).all():  # (NaN fails both)
        return None
    total = probs.sum(axis=1)  # (pairwise summation: within 1e-15 of math.fsum's)
    off = np.abs(total - 1.0) > SUM_TOLERANCE
    if off.any():
        if not normalise or (total[off] == 0).any():
            return None
        probs[off] /= total[off, None]
        changed[0] += int(off.sum())
    return ids, probs.astype(DTYPE)


def _until_error(rows: Iterator[tuple[int, list[str]]], error: list[FileFormatError]
                 ) -> Iterator[tuple[int, list[str]]]:
    """``rows`` until the reader raises: the error is kept in ``error``, not raised."""
    try:
        yield from rows
    except FileFormatError as exc:
        error.append(exc)


def _rows(path: Path, kind: str, labels: list[str], normalise: bool,
          changed: list[int]) -> Iterator[_Staged]:
    """Every row of the file, checked, as ``(line, id, probabilities as stored)``;
    ``changed[0]`` counts the rows normalised."""
    if kind == "csv":
        yield from _csv_rows(path, labels, normalise, changed)
        return
    found: _Layout | None = None
    for line, obj in records(path, kind):
        if found is None:
            found = _Layout(path, labels, list(obj), text=False)
        layout = found
        extra = [k for k in obj if k not in layout.keys]
        if extra:
            key = extra[0]
            raise FileFormatError(str(path), line, key,
                                  f"unknown class {key[2:]!r}: the label set is {labels}"
                                  if key.startswith("p_") and not layout.scored
                                  else "unexpected key (this file's first row has "
                                  f"{layout.keys})")
        missing = [k for k in layout.keys if k not in obj]
        if missing:
            key = missing[0]
            raise FileFormatError(str(path), line, key,
                                  f"missing class {key[2:]!r}" if key.startswith("p_")
                                  else "missing value")
        ext, probs, fixed = layout.row(line, [obj[k] for k in layout.keys], normalise)
        changed[0] += fixed
        yield line, ext, probs.tobytes()


# --- loading -----------------------------------------------------------------------------

def load_predictions(session: Session, project: Project, path: str | Path, *, model: str,
                     fmt: str | None = None, normalise: bool = False,
                     progress: Callable[[int], None] | None = None) -> PredictionLoad:
    """Check ``path`` whole and load it as the next version of ``model`` in ``project``,
    in the caller's transaction (commit or roll back is the caller's): all or nothing.
    ``progress(rows)`` is called as rows are checked."""
    path = Path(path)
    check_model_name(model)
    kind = detect_format(path, fmt)
    pid = project.id
    if pid is None:
        raise ValueError(f"project {project.name!r} is not in the database yet")
    labels = list(project.labels)
    conn = session.connection()
    _create_stage(conn)
    changed = [0]
    n = 0
    try:
        batch: list[_Staged] = []
        try:
            for staged in _rows(path, kind, labels, normalise, changed):
                batch.append(staged)
                if len(batch) >= BATCH:
                    _stage(conn, batch)
                    n += len(batch)
                    batch = []
                    if progress:
                        progress(n)
            _stage(conn, batch)
            n += len(batch)
        except FileFormatError as exc:
            # a duplicate or unknown id on a line before this one is the first problem
            _stage(conn, batch)
            _check_ids(conn, path, pid, before=exc.context.get("line"))
            raise
        if not n:
            raise FileFormatError(str(path), 1, None, "no rows to load")
        _check_ids(conn, path, pid)
        version = _new_version(session, project, model, labels)
        assert version.id is not None  # flushed
        inserted = conn.exec_driver_sql(
            f"INSERT INTO prediction (version_id, task_id, probs) SELECT {int(version.id)}, "
            f"t.id, s.probs FROM {STAGE} s JOIN task t ON t.project_id = {int(pid)} "
            "AND t.external_id = s.ext").rowcount
        assert inserted == n, (inserted, n)
        version.n_rows = n
        session.add(version)
        session.flush()
    finally:
        _drop_stage(conn)
    return PredictionLoad(project.name, model, version.version, n, changed[0])


def _create_stage(conn: Connection) -> None:
    """The load's temporary table (PostgreSQL: dropped at the end of the transaction,
    whatever happens; SQLite: by :func:`_drop_stage`)."""
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    end = " ON COMMIT DROP" if conn.dialect.name == "postgresql" else ""
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {STAGE}")
    conn.exec_driver_sql(f"CREATE TEMPORARY TABLE {STAGE} (line INTEGER NOT NULL, "
                         f"ext VARCHAR({MAX_ID}) NOT NULL, probs {blob} NOT NULL){end}")


def _drop_stage(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {STAGE}")


def _stage(conn: Connection, batch: list[_Staged]) -> None:
    if not batch:
        return
    dbapi: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        with dbapi.cursor() as cur, cur.copy(f"COPY {STAGE} (line, ext, probs) FROM STDIN"
                                             ) as copy:
            copy.write("".join([f"{line}\t{_copy_text(ext)}\t\\\\x{probs.hex()}\n"
                                for line, ext, probs in batch]))
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cur = dbapi.cursor()
    try:
        cur.executemany(f"INSERT INTO {STAGE} (line, ext, probs) VALUES ({mark}, {mark}, "
                        f"{mark})", batch)
    finally:
        cur.close()


def _copy_text(value: str) -> str:
    # an id holds no control character (reading.name refused them): a backslash is all
    # that COPY's text format needs escaped
    return value.replace("\\", "\\\\") if "\\" in value else value


def _check_ids(conn: Connection, path: Path, project_id: int, before: int | None = None
               ) -> None:
    """Raise on the first staged row (before line ``before``) whose id is a duplicate of
    an earlier row's or not a task of the project."""
    limit = f" AND s.line < {int(before)}" if before is not None else ""
    dup = conn.exec_driver_sql(
        f"SELECT s.line, s.ext, f.first FROM {STAGE} s JOIN (SELECT ext, min(line) AS first "
        f"FROM {STAGE} GROUP BY ext HAVING count(*) > 1) f ON f.ext = s.ext "
        f"WHERE s.line > f.first{limit} ORDER BY s.line LIMIT 1").first()
    unknown = conn.exec_driver_sql(
        f"SELECT s.line, s.ext FROM {STAGE} s WHERE NOT EXISTS (SELECT 1 FROM task t "
        f"WHERE t.project_id = {int(project_id)} AND t.external_id = s.ext){limit} "
        "ORDER BY s.line LIMIT 1").first()
    if dup is not None and (unknown is None or dup[0] < unknown[0]):
        raise FileFormatError(str(path), int(dup[0]), "id",
                              f"duplicate id {dup[1]!r} (first on line {dup[2]})")
    if unknown is not None:
        raise FileFormatError(str(path), int(unknown[0]), "id",
                              f"unknown task {unknown[1]!r}: not a task of this project "
                              "(load the tasks first)")


def _new_version(session: Session, project: Project, model: str, labels: list[str]
                 ) -> ModelVersion:
    last = session.exec(select(func.max(ModelVersion.version))
                        .where(col(ModelVersion.project_id) == project.id,
                               col(ModelVersion.name) == model)).one()
    assert project.id is not None
    version = ModelVersion(project_id=project.id, name=model, version=(last or 0) + 1,
                           created=utcnow(), n_rows=0, labels=labels)
    try:
        with session.begin_nested():
            session.add(version)
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"another load of model {model!r} into {project.name!r} made version "
                       f"{version.version} at the same time; load again",
                       project=project.name, model=model) from exc
    return version


# --- listing, removing -------------------------------------------------------------------

def list_versions(session: Session, project: Project, model: str | None = None
                  ) -> list[VersionInfo]:
    """The project's model versions (of ``model`` only, if given), by name and version."""
    stmt = select(ModelVersion).where(col(ModelVersion.project_id) == project.id)
    if model is not None:
        stmt = stmt.where(col(ModelVersion.name) == model)
    rows = session.exec(stmt.order_by(col(ModelVersion.name), col(ModelVersion.version)))
    return [VersionInfo(v.name, v.version, v.n_rows, as_utc(v.created)) for v in rows]


def remove_predictions(session: Session, project: Project, model: str,
                       version: int | None = None) -> list[VersionInfo]:
    """Delete ``model``'s versions (or only ``version``) and their predictions from the
    project, in the caller's transaction; returns what was removed. None there: NotFound."""
    removed = list_versions(session, project, model)
    if version is not None:
        removed = [v for v in removed if v.version == version]
    if not removed:
        what = f"model {model!r}" + (f" version {version}" if version is not None else "")
        raise NotFound(f"project {project.name!r} has no predictions of {what}",
                       project=project.name, model=model)
    ids = select(ModelVersion.id).where(col(ModelVersion.project_id) == project.id,
                                        col(ModelVersion.name) == model)
    if version is not None:
        ids = ids.where(col(ModelVersion.version) == version)
    session.exec(delete(Prediction).where(col(Prediction.version_id).in_(ids)))
    gone = delete(ModelVersion).where(col(ModelVersion.project_id) == project.id,
                                      col(ModelVersion.name) == model)
    if version is not None:
        gone = gone.where(col(ModelVersion.version) == version)
    session.exec(gone)
    session.flush()
    return removed


def delete_all(session: Session, project_id: int) -> int:
    """Delete every model version of a project and its predictions (``project delete``);
    returns the number of predictions deleted."""
    ids = select(ModelVersion.id).where(col(ModelVersion.project_id) == project_id)
    n = session.exec(delete(Prediction).where(col(Prediction.version_id).in_(ids))).rowcount
    session.exec(delete(ModelVersion).where(col(ModelVersion.project_id) == project_id))
    return int(n or 0)


# --- reading -----------------------------------------------------------------------------

# a version's rows, straight from the driver a part at a time (SQLAlchemy's select: typed)
_VERSION_ROWS = (sa_select(col(Prediction.task_id), col(Prediction.probs))
                 .where(col(Prediction.version_id) == bindparam("v"))
                 .execution_options(yield_per=50_000))


def read_predictions(session: Session, project: Project, *,
                     task_index: NDArray[np.int64] | Sequence[int],
                     all_versions: bool = False) -> dict[str, NDArray[np.float64]]:
    """Source name (``MODEL@vN``) -> ``len(task_index) x n_classes`` float64 array of the
    model version's probabilities: columns in the project's label-set order, row ``i``
    for the task whose SQL id is ``task_index[i]`` (:attr:`ProjectView.task_id
    <labelq.record.problem.ProjectView.task_id>`, by task seq), a row of NaN where the
    version has no prediction for that task. Only the latest version of each model unless
    ``all_versions``. The stored float32 values are widened exactly: a row sums to 1
    within about 1e-7 (float32's rounding), not exactly."""
    index = np.asarray(task_index, dtype=np.int64)
    n, k = int(index.size), len(project.labels)
    order = np.argsort(index, kind="stable")
    ordered = index[order]
    versions = session.exec(select(ModelVersion)
                            .where(col(ModelVersion.project_id) == project.id)
                            .order_by(col(ModelVersion.name), col(ModelVersion.version))).all()
    if not all_versions:
        latest: dict[str, ModelVersion] = {}
        for v in versions:
            latest[v.name] = v  # (ordered by version: the last is the latest)
        versions = list(latest.values())
    conn = session.connection()
    out: dict[str, NDArray[np.float64]] = {}
    for v in versions:
        stored = list(v.labels)
        if sorted(stored) != sorted(project.labels):  # (a label set does not change)
            raise Conflict(f"model version {source_name(v.name, v.version)} was loaded for "
                           f"the label set {stored}, not the project's {project.labels}")
        columns = [stored.index(c) for c in project.labels]
        arr = np.full((n, k), np.nan, dtype=np.float64)
        result = conn.execute(_VERSION_ROWS, {"v": v.id})
        for part in result.partitions(50_000):  # (a part at a time: no list of every row)
            if not n:
                break
            ids = np.fromiter((row[0] for row in part), dtype=np.int64, count=len(part))
            probs = np.frombuffer(b"".join([row[1] for row in part]), dtype=DTYPE
                                  ).reshape(len(part), k)
            at = np.searchsorted(ordered, ids).clip(max=n - 1)
            found = ordered[at] == ids
            arr[order[at[found]]] = probs[found][:, columns].astype(np.float64)
        out[source_name(v.name, v.version)] = arr
    return out


def suggestion(session: Session, project: Project, task_seq: int, worker_id: int) -> str | None:
    """The answer the labeling page shows worker ``worker_id`` beside task ``task_seq``
    when the project shows suggestions (``show_suggestions``, issue 42): the top class of
    the latest version of the model loaded last that predicted it (the first class on a
    tie); None without one, or where the assignment is one of those that show none
    (:func:`labelq.record.withheld.withheld`). One indexed read."""
    return suggestions(session, project, [task_seq], worker_id)[task_seq]


def suggestions(session: Session, project: Project, task_seqs: Sequence[int],
                worker_id: int) -> dict[int, str | None]:
    """:func:`suggestion` of each of ``task_seqs`` (one read: the tasks' predictions, newest
    version first; the first row of each task is its suggestion)."""
    from .models import Task
    from .withheld import withheld

    out: dict[int, str | None] = {seq: None for seq in task_seqs}
    if not out:
        return out
    rows = session.exec(
        select(Task.seq, Task.id, Prediction.probs, ModelVersion.labels)
        .join(ModelVersion, col(ModelVersion.id) == col(Prediction.version_id))
        .join(Task, col(Task.id) == col(Prediction.task_id))
        .where(Task.project_id == project.id, col(Task.seq).in_(list(out)))
        .order_by(col(ModelVersion.created).desc(), col(ModelVersion.id).desc())).all()
    seen: set[int] = set()
    for seq, task_id, probs_bytes, labels in rows:
        if seq in seen:
            continue
        seen.add(seq)
        if task_id is None or withheld(worker_id, task_id):
            continue
        probs = np.frombuffer(probs_bytes, dtype=DTYPE)
        if probs.size == len(labels):
            out[seq] = str(list(labels)[int(np.argmax(probs))])
    return out
