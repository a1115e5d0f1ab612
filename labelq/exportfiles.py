"""The files an export writes: CSV, JSON lines or Parquet, each ready for training.

An answers row (:func:`labelq.exporting.aggregated_rows`) may carry the task's ``payload``
(the object loaded with the task) and its per-annotator ``labels`` (a list of
``{"annotator", "label", "at"}``). How each format holds them:

* **JSONL**: both as they are, nested in the row's object (one file, no join).
* **CSV**: each top-level field of the payload as a column ``payload.<field>`` after the
  fixed columns; a value that is an object or a list is written as JSON. No fixed column
  has a ``.`` in its name and a payload's top-level fields are distinct, so a payload column
  never collides with another column (nested fields are not flattened: ``{"a": {"b": 1}}``
  is ``payload.a`` = ``{"b": 1}``, never ``payload.a.b``, which a top-level field ``"a.b"``
  would also make). The per-annotator labels stay in the raw export (``--raw``).
* **Parquet** (``pip install 'labelq[parquet]'``: pyarrow): the CSV's columns, typed -- a
  payload field whose values are all booleans, all integers, all numbers or all strings
  is a column of that type, any other a string column (objects and lists as JSON) -- and
  ``labels`` as a list of structs (annotator, label, at as a UTC timestamp).

Files are written atomically (:func:`atomic_output`: a temporary file beside the target,
renamed over it) and created with the mode ``open()`` gives a new file: 0666 less the
process's umask, as any other tool's output (``umask 077`` keeps exports private).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import secrets
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, cast

from .errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlmodel import Session

    from .record.models import Project

__all__ = ["FORMATS", "PAYLOAD_PREFIX", "PayloadSchema", "payload_schema", "task_details",
           "atomic_output", "write_rows", "write_parquet", "require_pyarrow"]

#: the file formats of an export
FORMATS = ("csv", "jsonl", "parquet")
#: the prefix of a payload field's column in CSV and Parquet
PAYLOAD_PREFIX = "payload."
_BATCH = 5000


class PayloadSchema:
    """The payload fields of the exported tasks, in first-seen order, with the kind of
    value each holds: ``bool``, ``int``, ``float``, ``str``, or ``json`` (anything else,
    or a mix: written as a string)."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}

    def see(self, payload: dict[str, Any]) -> None:
        for key, value in payload.items():
            if value is None:
                self.kinds.setdefault(key, "null")
                continue
            kind = _kind(value)
            had = self.kinds.get(key)
            if had is None or had == "null":
                self.kinds[key] = kind
            elif had != kind:
                self.kinds[key] = "float" if {had, kind} == {"int", "float"} else "json"

    @property
    def columns(self) -> list[str]:
        return [PAYLOAD_PREFIX + k for k in self.kinds]

    def cell(self, key: str, value: Any) -> Any:
        """``value`` of field ``key`` as a CSV or Parquet cell of its column's kind."""
        if value is None:
            return None
        kind = self.kinds[key]
        if kind == "float":
            return float(value)
        if kind == "json" or kind == "null":
            return value if isinstance(value, str) else json.dumps(value)
        return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if -2**63 <= value < 2**63 else "json"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "json"


def _exported(project: Project) -> Any:
    """The SQL condition "this task is exported": not gold, or marked gold after loading."""
    from sqlmodel import col, or_

    from .record.models import Task
    return (col(Task.project_id) == project.id) & or_(col(Task.is_gold).is_(False),
                                                      col(Task.marked).is_not(None))


def payload_schema(session: Session, project: Project) -> PayloadSchema:
    """The payload fields of ``project``'s exported tasks (one pass over them, streamed)."""
    from sqlalchemy import select
    from sqlmodel import col

    from .record.models import Task
    schema = PayloadSchema()
    q: Select[Any] = (select(col(Task.payload)).where(_exported(project))
                      .order_by(col(Task.seq)).execution_options(yield_per=_BATCH))
    for (payload,) in session.connection().execute(q):
        schema.see(cast("dict[str, Any]", payload) or {})
    return schema


def task_details(session: Session, project: Project, *, exclude_paused: bool = False,
                 page: int = _BATCH
                 ) -> Iterator[tuple[int, dict[str, Any], list[dict[str, Any]]]]:
    """Per exported task, in ``seq`` order: (seq, payload, labels), ``labels`` every label
    on it in arrival order as ``{"annotator", "label", "at"}`` (``exclude_paused``: not
    those of workers paused or removed now, as the fit leaves them out). Read in pages of
    ``page`` tasks (by ``seq``, then the labels of that range of ``seq``): memory bounded by
    a page, whatever the project's size."""
    from sqlalchemy import select
    from sqlmodel import col

    from .record.models import Label, Task, Worker
    conn = session.connection()
    last = -1
    while True:
        tasks = conn.execute(select(col(Task.seq), col(Task.payload))
                             .where(_exported(project), col(Task.seq) > last)
                             .order_by(col(Task.seq)).limit(page)).all()
        if not tasks:
            return
        lo, hi = tasks[0][0], tasks[-1][0]
        q = (select(col(Task.seq), col(Worker.handle), col(Label.value),
                    col(Label.received), col(Worker.status))
             .join(Task, col(Task.id) == col(Label.task_id))
             .join(Worker, col(Worker.id) == col(Label.worker_id))
             .where(col(Label.project_id) == project.id, col(Task.project_id) == project.id,
                    col(Task.seq) >= lo, col(Task.seq) <= hi)
             .order_by(col(Label.id)))
        by_seq: dict[int, list[dict[str, Any]]] = {}
        for seq, handle, value, received, status in conn.execute(q):
            if not exclude_paused or status == "active":
                by_seq.setdefault(int(seq), []).append(
                    {"annotator": handle, "label": value, "at": _iso(received)})
        for row in tasks:
            at = int(cast(int, row[0]))
            yield at, cast("dict[str, Any]", row[1]) or {}, by_seq.get(at, [])
        last = int(hi)


def _iso(at: datetime) -> str:
    from .record.models import as_utc
    return as_utc(at).isoformat()


@contextlib.contextmanager
def atomic_output(out: str, *, binary: bool = False) -> Iterator[IO[Any]]:
    """Standard output for ``-``; otherwise a temporary file beside ``out``, renamed over it
    on success, so a failed or interrupted export never leaves a half-written file. The
    file is created as ``open()`` creates one (mode 0666 less the umask), not 0600 as a
    ``tempfile.mkstemp`` file would be."""
    if out == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(directory, f".labelq-export-{secrets.token_hex(8)}")
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as to open(out, "w")
            break
        except FileExistsError:
            continue
    try:
        if binary:
            with os.fdopen(fd, "wb") as fb:
                yield fb
        else:
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
                yield fh
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def write_rows(rows: Iterable[dict[str, Any]], out: IO[str], fmt: str, *,
               columns: list[str] | None = None, schema: PayloadSchema | None = None,
               progress: Callable[[int], None] | None = None, every: int = 5000) -> int:
    """Write dict rows as CSV (header from ``columns`` or the first row, then ``schema``'s
    payload columns; ``payload`` and ``labels`` left out unless ``columns`` names them: an
    export's are nested, a gold suggestion's ``labels`` is a cell) or JSON lines (every
    key as it is);
    ``progress(n)`` every ``every`` rows. Returns the number of rows."""
    if fmt not in ("csv", "jsonl"):
        raise InputError(f"write_rows writes csv or jsonl, not {fmt!r}", field="format")
    n = 0
    writer = None
    extra = schema.columns if schema is not None else []
    for row in rows:
        if fmt == "csv":
            if writer is None:
                head = columns or [k for k in row if k not in ("payload", "labels")]
                writer = csv.DictWriter(out, fieldnames=head + extra)
                writer.writeheader()
            writer.writerow(_flat(row, schema, keep=columns or ()))
        else:
            out.write(json.dumps(row) + "\n")
        n += 1
        if progress is not None and n % every == 0:
            progress(n)
    if fmt == "csv" and writer is None and (columns or extra):
        csv.writer(out).writerow((columns or []) + extra)
    return n


def _flat(row: dict[str, Any], schema: PayloadSchema | None,
          keep: Collection[str] = ()) -> dict[str, Any]:
    flat = {k: v for k, v in row.items() if k in keep or k not in ("payload", "labels")}
    if schema is not None:
        for key, value in (row.get("payload") or {}).items():
            flat[PAYLOAD_PREFIX + key] = schema.cell(key, value)
    return flat


def require_pyarrow() -> Any:
    """pyarrow (with its Parquet module), or an :class:`InputError` naming the extra."""
    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401  (the writer)
    except ImportError as exc:
        raise InputError("the parquet format needs pyarrow: pip install 'labelq[parquet]'",
                         field="format") from exc
    return pa


def write_parquet(rows: Iterable[dict[str, Any]], out: IO[bytes], *, columns: list[str],
                  types: dict[str, str], schema: PayloadSchema | None = None,
                  after: tuple[str, ...] = (),
                  progress: Callable[[int], None] | None = None, every: int = 5000) -> int:
    """Write dict rows as Parquet, in row groups of ``every`` rows: the fixed ``columns``,
    then ``schema``'s payload columns, then the columns ``after`` (the CSV's columns, then
    what CSV cannot hold); ``types`` gives the fixed columns' kinds (``str``, ``int``,
    ``float``, ``bool``, ``time``: an ISO 8601 string read as a UTC timestamp; ``labels``:
    the per-annotator list). Returns the number of rows."""
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    simple = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(),
              "bool": pa.bool_(), "time": pa.timestamp("us", tz="UTC"),
              "null": pa.string(), "json": pa.string()}
    simple["labels"] = pa.list_(pa.struct([("annotator", pa.string()),
                                           ("label", pa.string()),
                                           ("at", simple["time"])]))
    fields = [(c, simple[types[c]]) for c in columns]
    kinds = schema.kinds if schema is not None else {}
    fields += [(PAYLOAD_PREFIX + k, simple[kd]) for k, kd in kinds.items()]
    fields += [(c, simple[types[c]]) for c in after]
    arrow_schema = pa.schema(fields)
    names = [f[0] for f in fields]

    def convert(name: str, value: Any) -> Any:
        kind = types.get(name)
        if value is None:
            return None
        if kind == "time":
            return datetime.fromisoformat(value)
        if kind == "labels":
            return [{**lab, "at": datetime.fromisoformat(lab["at"])} for lab in value]
        return value

    n = 0
    batch: dict[str, list[Any]] = {c: [] for c in names}
    with pq.ParquetWriter(out, arrow_schema) as writer:
        def flush() -> None:
            writer.write_table(pa.table(batch, schema=arrow_schema))
            for c in names:
                batch[c].clear()

        for row in rows:
            payload = row.get("payload") or {}
            for c in columns:
                batch[c].append(convert(c, row.get(c)))
            for k in kinds:
                batch[PAYLOAD_PREFIX + k].append(
                    schema.cell(k, payload.get(k)) if schema is not None else None)
            for c in after:
                batch[c].append(convert(c, row.get(c)))
            n += 1
            if n % every == 0:
                flush()
                if progress is not None:
                    progress(n)
        if n % every or n == 0:
            flush()
    return n
