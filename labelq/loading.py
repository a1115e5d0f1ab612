"""Loading tasks and gold questions from CSV or JSONL, all or nothing.

A file is parsed and validated completely before anything is written; the rows are then
inserted in one transaction. Any malformed row — missing or duplicate id, a gold answer not
in the label set, broken JSON, bad encoding, a wrong column count, a quote left open (CSV is
read strictly: the error names the line the quote opened on), a control character in an id
or category, an id over 500 or a category over 200 characters, a NUL in the payload — raises
:class:`~labelq.errors.FileFormatError` naming the file, the line and the field, and the
database stays exactly as it was. Rows whose id is already in the project are skipped, so
loading the same file twice does not duplicate tasks.

Columns / keys: ``id`` (required), ``category`` (optional), ``answer`` (gold only; required
there); every other column or key becomes the task's JSON payload. A JSONL file's lines end
at ``\n`` only (U+2028 or U+0085 inside a JSON string are text, not line ends). A file that
cannot be read (missing, a directory) is an :class:`~labelq.errors.InputError` too.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from sqlalchemy import func, insert
from sqlmodel import Session, select

from .errors import Conflict, FileFormatError, InputError
from .models import Project, Task, utcnow

__all__ = ["ParsedRow", "parse_task_file", "load_tasks", "LoadResult"]

RESERVED = ("id", "category", "answer")
CHUNK = 20_000
MAX_ID = 500  # the columns' lengths (models.Task)
MAX_TEXT = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}", path=str(path)) from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileFormatError(str(path), line, None,
                              f"bad encoding: byte {raw[exc.start]:#04x} is not UTF-8") from exc


def _csv_rows(path: Path, text: str) -> Iterator[tuple[int, dict]]:
    """Rows with the line each record starts on. ``strict``: a quote left open no longer
    swallows the rest of the file into one field; the error names the line it opened on."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise FileFormatError(str(path), 1, None, "file is empty") from None
    except csv.Error as exc:
        raise FileFormatError(str(path), 1, None, f"unreadable CSV header: {exc}") from exc
    header = [h.strip() for h in header]
    if "id" not in header:
        raise FileFormatError(str(path), 1, "id", f"missing column; header is {header}")
    if len(set(header)) != len(header):
        raise FileFormatError(str(path), 1, None, f"duplicate column name in header {header}")
    width = len(header)
    end = reader.line_num
    while True:
        start = end + 1  # a record may span lines (a quoted field with newlines)
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise FileFormatError(str(path), start, None,
                                  _csv_problem(exc, start, reader.line_num)) from exc
        end = reader.line_num
        if not row:
            continue
        if len(row) != width:
            raise FileFormatError(str(path), start, None,
                                  f"expected {width} columns, found {len(row)}")
        yield start, dict(zip(header, row))


def _csv_problem(exc: csv.Error, start: int, stop: int) -> str:
    if "unexpected end of data" in str(exc):
        return "unterminated quote: the quoted field opened on this line is never closed"
    if "expected after" in str(exc):
        return (f"malformed CSV: a quoted field opened on this line is closed on line {stop} "
                f"and followed by more text ({exc}); a quote inside a quoted field is "
                'written twice ("")')
    return f"malformed CSV: {exc}"


def _jsonl_rows(path: Path, text: str) -> Iterator[tuple[int, dict]]:
    # only "\n" ends a line: str.splitlines() also splits on U+2028, U+0085 and other
    # separators that JSON allows unescaped inside strings
    for line, raw in enumerate(text.split("\n"), start=1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FileFormatError(str(path), line, None,
                                  f"broken JSON: {exc.msg} at column {exc.colno}") from exc
        if not isinstance(obj, dict):
            raise FileFormatError(str(path), line, None,
                                  f"expected a JSON object, got {type(obj).__name__}")
        yield line, obj


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


def detect_format(path: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in ("csv", "jsonl"):
            raise InputError(f"unknown file format {fmt!r}; use csv or jsonl")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    raise InputError(f"{path}: cannot tell the format from the extension {suffix!r}; "
                     "pass --format csv or --format jsonl", path=str(path))


def _text(value, path: Path, line: int, field: str, required: bool,
          max_length: int = MAX_TEXT) -> str:
    """A key column's value: a string or number, without control characters (PostgreSQL
    refuses NUL; the API cannot name such an id), at most ``max_length`` characters."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise FileFormatError(str(path), line, field, "missing value")
        return ""
    if isinstance(value, (dict, list)):
        raise FileFormatError(str(path), line, field, "must be a string or number")
    text = str(value).strip()
    bad = _CONTROL.search(text)
    if bad:
        raise FileFormatError(str(path), line, field,
                              f"control character {bad.group()!r} at position {bad.start() + 1}")
    if len(text) > max_length:
        raise FileFormatError(str(path), line, field,
                              f"longer than {max_length} characters ({len(text)})")
    return text


def _check_payload(value, path: Path, line: int, field: str) -> None:
    """No NUL anywhere in the payload (PostgreSQL cannot store it); names the column/key."""
    if isinstance(value, str):
        if "\x00" in value:
            raise FileFormatError(str(path), line, field, "contains a NUL character")
    elif isinstance(value, dict):
        for k, v in value.items():
            if "\x00" in k:
                raise FileFormatError(str(path), line, field, "a key contains a NUL character")
            _check_payload(v, path, line, field)
    elif isinstance(value, list):
        for v in value:
            _check_payload(v, path, line, field)


def parse_task_file(path: str | Path, *, gold: bool = False, label_set: list[str] | None = None,
                    fmt: str | None = None) -> list[ParsedRow]:
    """Parse and validate a whole task or gold file; raise on the first bad row."""
    path = Path(path)
    kind = detect_format(path, fmt)
    text = _decode(path)
    rows_iter = _csv_rows(path, text) if kind == "csv" else _jsonl_rows(path, text)
    seen: dict[str, int] = {}
    allowed = set(label_set or [])
    out: list[ParsedRow] = []
    for line, row in rows_iter:
        ext = _text(row.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        if ext in seen:
            raise FileFormatError(str(path), line, "id",
                                  f"duplicate id {ext!r} (first on line {seen[ext]})")
        seen[ext] = line
        category = _text(row.get("category"), path, line, "category", required=False)
        answer = None
        if gold:
            answer = _text(row.get("answer"), path, line, "answer", required=True)
            if allowed and answer not in allowed:
                raise FileFormatError(str(path), line, "answer",
                                      f"{answer!r} is not in the label set {sorted(allowed)}")
        payload = {k: v for k, v in row.items() if k not in RESERVED}
        for key, value in payload.items():
            _check_payload({key: value}, path, line, key)
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
