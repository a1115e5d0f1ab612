"""Loading tasks and gold questions from CSV or JSONL, all or nothing.

A file is parsed and validated completely before anything is written (read by the one
strict reader of every label and task file, :mod:`labelq.reading`); the rows are then
inserted in one transaction. Any malformed row — missing or duplicate id, a gold answer not
in the label set, broken JSON, bad encoding, a wrong column count, a quote left open (the
error names the line the quote opened on), a control character in an id or category, an id
with spaces around it, an id over 500 or a category over 200 characters, a NUL or a lone
surrogate anywhere, ``NaN``, an integer beyond 64 bits, nesting over 64 levels — raises
:class:`~labelq.errors.FileFormatError` naming the file, the line and the field, and the
database stays exactly as it was. Rows whose id is already in the project are skipped, so
loading the same file twice does not duplicate tasks.

Columns / keys: ``id`` (required), ``category`` (optional), ``answer`` (gold only; required
there); every other column or key becomes the task's JSON payload — except a JSONL
``payload`` key holding an object, which *is* the payload (``{"id": "t1", "payload":
{"text": "..."}}`` stores ``{"text": "..."}``; other keys beside it are refused). A JSONL file's lines end
at ``\n`` only (U+2028 or U+0085 inside a JSON string are text, not line ends). A file that
cannot be read (missing, a directory) is an :class:`~labelq.errors.InputError` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy import func, insert
from sqlmodel import Session, select

from .errors import Conflict, FileFormatError
from .models import Project, Task, utcnow
from .reading import check_value, detect_format, name, records

__all__ = ["ParsedRow", "parse_task_file", "load_tasks", "LoadResult"]

RESERVED = ("id", "category", "answer")
CHUNK = 20_000
MAX_ID = 500  # the columns' lengths (models.Task)
MAX_TEXT = 200


@dataclass(frozen=True)
class ParsedRow:
    line: int
    external_id: str
    category: str
    payload: dict
    answer: str | None


@dataclass(frozen=True)
class LoadResult:
    inserted: int
    skipped_existing: int
    rows: int


def _bulk_writer(conn, columns: tuple[str, ...]) -> Callable[[list[tuple]], None]:
    """A function inserting row tuples into ``task`` as fast as the driver allows.

    The SQLAlchemy types' bind processors are applied once per column kind (JSON via
    ``json.dumps``, the timestamp once for the whole load), then rows go to the DBAPI
    directly: ``executemany`` on SQLite, ``COPY`` on PostgreSQL (psycopg 3). Per-row
    statement compilation was 2/3 of the load time before.
    """
    table = Task.__table__
    dialect = conn.dialect
    ts_proc = table.c.created.type.bind_processor(dialect)
    json_proc = table.c.payload.type.bind_processor(dialect) or json.dumps
    i_payload, i_created = columns.index("payload"), columns.index("created")
    dbapi = conn.connection.driver_connection
    ts_cache: dict = {}

    def prepare(row: tuple) -> list:
        out = list(row)
        out[i_payload] = json_proc(row[i_payload])
        ts = row[i_created]
        if ts not in ts_cache:
            ts_cache[ts] = ts_proc(ts) if ts_proc else ts
        out[i_created] = ts_cache[ts]
        return out

    if dialect.name == "sqlite":
        sql = (f"INSERT INTO task ({', '.join(columns)}) "
               f"VALUES ({', '.join('?' for _ in columns)})")

        def write(rows: list[tuple]) -> None:
            cur = dbapi.cursor()
            try:
                cur.executemany(sql, [prepare(r) for r in rows])
            finally:
                cur.close()
        return write
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        sql = f"COPY task ({', '.join(columns)}) FROM STDIN"

        def write(rows: list[tuple]) -> None:
            with dbapi.cursor() as cur, cur.copy(sql) as copy:
                for r in rows:
                    copy.write_row(prepare(r))
        return write

    def write(rows: list[tuple]) -> None:  # any other database: portable executemany
        conn.execute(insert(table), [dict(zip(columns, r)) for r in rows])
    return write


def parse_task_file(path: str | Path, *, gold: bool = False, label_set: list[str] | None = None,
                    fmt: str | None = None) -> list[ParsedRow]:
    """Parse and validate a whole task or gold file; raise on the first bad row."""
    path = Path(path)
    kind = detect_format(path, fmt)
    rows_iter = records(path, kind)
    seen: dict[str, int] = {}
    allowed = set(label_set or [])
    out: list[ParsedRow] = []
    for line, row in rows_iter:
        if kind == "csv" and "id" not in row:
            raise FileFormatError(str(path), 1, "id", f"missing column; header is {list(row)}")
        ext = name(row.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        if ext in seen:
            raise FileFormatError(str(path), line, "id",
                                  f"duplicate id {ext!r} (first on line {seen[ext]})")
        seen[ext] = line
        category = name(row.get("category"), path, line, "category", required=False,
                        max_length=MAX_TEXT)
        answer = None
        if gold:
            answer = name(row.get("answer"), path, line, "answer", required=True,
                          max_length=MAX_TEXT)
            if allowed and answer not in allowed:
                raise FileFormatError(str(path), line, "answer",
                                      f"{answer!r} is not in the label set {sorted(allowed)}")
        payload = {k: v for k, v in row.items() if k not in RESERVED}
        for key, value in payload.items():
            check_value(value, path, line, key)
        if kind == "jsonl" and isinstance(payload.get("payload"), dict):
            # {"id": ..., "payload": {...}}: that object is the payload (it was stored one
            # level down, {"payload": {...}}, and the page showed none of its keys)
            others = sorted(k for k in payload if k != "payload")
            if others:
                raise FileFormatError(str(path), line, "payload",
                                      "the payload is given both as the 'payload' object "
                                      f"and as keys beside it ({', '.join(others)}): put "
                                      "them in the object")
            payload = payload["payload"]
        out.append(ParsedRow(line, ext, category, payload, answer))
    if not out:
        raise FileFormatError(str(path), 1, None, "no rows to load")
    return out


def load_tasks(session: Session, project: Project, path: str | Path, *, gold: bool = False,
               fmt: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> LoadResult:
    """Validate ``path`` fully, then insert its new rows into ``project`` in the caller's
    transaction (commit or roll back is the caller's). ``progress(written, total)`` is
    called as rows are written."""
    rows = parse_task_file(path, gold=gold, label_set=project.labels, fmt=fmt)
    kind_of = dict(session.exec(select(Task.external_id, Task.is_gold)
                                .where(Task.project_id == project.id)).all())
    # an id already loaded as the other kind is not "already present": skipping it would
    # leave gold loaded from task ids with no gold at all (and the reverse)
    clash = [r for r in rows if r.external_id in kind_of and bool(kind_of[r.external_id]) != gold]
    if clash:
        what, other = ("gold questions", "tasks") if gold else ("tasks", "gold questions")
        shown = ", ".join(repr(r.external_id) for r in clash[:5]) + (", ..." if len(clash) > 5
                                                                    else "")
        raise Conflict(
            f"{path}: {len(clash)} of these {what} have ids already loaded as {other} of "
            f"{project.name!r} ({shown}; first on line {clash[0].line}); nothing was loaded. "
            + ("A task does not become a gold question by loading it again: make loaded "
               f"tasks gold with 'labelq gold mark {project.name} --file FILE', or give new "
               "gold questions ids of their own (e.g. prefix them with 'gold-')."
               if gold else "Give these tasks ids of their own."), project=project.name)
    existing = set(kind_of)
    new = [r for r in rows if r.external_id not in existing]
    seq0 = session.exec(select(func.coalesce(func.max(Task.seq) + 1, 0))
                        .where(Task.project_id == project.id)).one()
    columns = ("project_id", "seq", "external_id", "category", "payload", "is_gold",
               "gold_answer", "created")
    conn = session.connection()
    writer = _bulk_writer(conn, columns)
    created = utcnow()
    for start in range(0, len(new), CHUNK):
        chunk = new[start:start + CHUNK]
        writer([(project.id, seq0 + start + k, r.external_id, r.category, r.payload, gold,
                 r.answer, created) for k, r in enumerate(chunk)])
        if progress:
            progress(start + len(chunk), len(new))
    return LoadResult(inserted=len(new), skipped_existing=len(rows) - len(new), rows=len(rows))
