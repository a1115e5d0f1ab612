"""Loading tasks and gold questions from CSV or JSONL, all or nothing, by streaming.

A file is validated completely before anything is written (read by the one strict reader
of every label and task file, :mod:`labelq.reading`), in a first pass over it that keeps
only the hashes of the ids it has seen (a duplicate hash is confirmed by reading the file
again up to that line); a second pass reads it again and inserts its new rows in batches
(PostgreSQL ``COPY``, SQLite ``executemany``), all in the caller's one transaction. Memory
does not grow with the file beyond those hashes. Any malformed row — missing or duplicate id, a gold answer not
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
from json.encoder import encode_basestring_ascii as _json_str
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from sqlalchemy import func, insert
from sqlmodel import Session, select

from .errors import Conflict, FileFormatError
from .models import Project, Task, utcnow
from .reading import check_value, csv_rows, detect_format, jsonl_lines, name, records

__all__ = ["ParsedRow", "parse_task_file", "check_task_file", "load_tasks", "LoadResult"]

RESERVED = ("id", "category", "answer")
CHUNK = 20_000  # rows a batch of the insert
CONFIRM = 500  # ids a query confirming them present
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


_Row = tuple[int, str, str, str, "str | None"]  # line, id, category, payload JSON, answer


def _bulk_writer(conn) -> Callable[[list[tuple]], None]:
    """A function inserting row tuples (:data:`COLUMNS`, the payload as JSON text and the
    timestamp as the driver takes it) into ``task`` as fast as the driver allows:
    ``executemany`` on SQLite, ``COPY`` on PostgreSQL (psycopg 3), straight to the DBAPI
    (per-row statement compilation was 2/3 of the load time once)."""
    table = Task.__table__
    dialect = conn.dialect
    dbapi = conn.connection.driver_connection
    if dialect.name == "sqlite":
        sql = (f"INSERT INTO task ({', '.join(COLUMNS)}) "
               f"VALUES ({', '.join('?' for _ in COLUMNS)})")

        def write(rows: list[tuple]) -> None:
            cur = dbapi.cursor()
            try:
                cur.executemany(sql, rows)
            finally:
                cur.close()
        return write
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        sql = f"COPY task ({', '.join(COLUMNS)}) FROM STDIN"

        def write(rows: list[tuple]) -> None:
            with dbapi.cursor() as cur, cur.copy(sql) as copy:
                for r in rows:
                    copy.write_row(r)
        return write
    i_payload = COLUMNS.index("payload")

    def write(rows: list[tuple]) -> None:  # any other database: portable executemany
        conn.execute(insert(table), [{c: (json.loads(v) if i == i_payload else v)
                                      for i, (c, v) in enumerate(zip(COLUMNS, r))}
                                     for r in rows])
    return write


COLUMNS = ("project_id", "seq", "external_id", "category", "payload", "is_gold",
           "gold_answer", "created")


def _missing_id(path: Path, header: list[str]) -> FileFormatError:
    return FileFormatError(str(path), 1, "id", f"missing column; header is {header}")


def _checked_ids(path: Path, kind: str, gold: bool, allowed: set[str]
                 ) -> Iterator[tuple[int, str, ParsedRow | None]]:
    """First pass: ``(line, id, row)`` of every row, each checked as the loader checks it
    (all but duplicate ids); ``row`` is the parsed row for JSONL, None for CSV."""
    if kind == "csv":
        header, rows = csv_rows(path)
        col = {h: i for i, h in enumerate(header)}
        i_id, i_cat, i_ans = col.get("id"), col.get("category"), col.get("answer")
        for line, row in rows:
            if i_id is None:
                raise _missing_id(path, header)
            ext = name(row[i_id], path, line, "id", required=True, max_length=MAX_ID)
            yield line, ext, None
            name(None if i_cat is None else row[i_cat], path, line, "category",
                 required=False, max_length=MAX_TEXT)
            if gold:
                answer = name(None if i_ans is None else row[i_ans], path, line, "answer",
                              required=True, max_length=MAX_TEXT)
                if allowed and answer not in allowed:
                    raise FileFormatError(str(path), line, "answer",
                                          f"{answer!r} is not in the label set "
                                          f"{sorted(allowed)}")
            # the payload's values are strings of UTF-8 text (no lone surrogate) whose NULs
            # the reader refused: check_value has nothing left to find in them
        return
    for line, obj in records(path, kind):
        ext = name(obj.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        yield line, ext, None
        yield line, ext, _finish(path, kind, line, ext, obj, gold, allowed)


def _finish(path: Path, kind: str, line: int, ext: str, row: dict, gold: bool,
            allowed: set[str]) -> ParsedRow:
    """A record's row once its id is known not to be a duplicate: every other check."""
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
    return ParsedRow(line, ext, category, payload, answer)


def _first_line_of(path: Path, kind: str, ext: str, before: int) -> int | None:
    """The first line before ``before`` holding id ``ext`` (the second check of a
    duplicate hash: the file read again, up to there)."""
    for line, other, _c, _p, _a in _rows(path, kind, gold=False):
        if line >= before:
            return None
        if other == ext:
            return line
    return None


def check_task_file(path: str | Path, *, gold: bool = False,
                    label_set: list[str] | None = None, fmt: str | None = None,
                    each: Callable[[int, str], None] | None = None) -> int:
    """Validate a whole task or gold file in one streaming pass (raise on the first bad
    row, as :func:`parse_task_file`); return its number of rows. ``each(line, id)`` is
    called for every row that passed."""
    path = Path(path)
    kind = detect_format(path, fmt)
    allowed = set(label_set or [])
    seen: set[int] = set()
    n = 0
    for line, ext, parsed in _checked_ids(path, kind, gold, allowed):
        if parsed is None:  # the id: is it new?
            h = hash(ext)
            if h in seen:
                first = _first_line_of(path, kind, ext, line)
                if first is not None:
                    raise FileFormatError(str(path), line, "id",
                                          f"duplicate id {ext!r} (first on line {first})")
            seen.add(h)
            if kind == "csv":
                n += 1
                if each:
                    each(line, ext)
            continue
        n += 1
        if each:
            each(line, ext)
    if not n:
        raise FileFormatError(str(path), 1, None, "no rows to load")
    return n


def parse_task_file(path: str | Path, *, gold: bool = False, label_set: list[str] | None = None,
                    fmt: str | None = None) -> list[ParsedRow]:
    """Parse and validate a whole task or gold file; raise on the first bad row."""
    path = Path(path)
    check_task_file(path, gold=gold, label_set=label_set, fmt=fmt)
    kind = detect_format(path, fmt)
    return [ParsedRow(line, ext, category, json.loads(payload), answer)
            for line, ext, category, payload, answer in _rows(path, kind, gold)]


def _rows(path: Path, kind: str, gold: bool) -> Iterator[_Row]:
    """Second pass over a file the first pass found good: ``(line, id, category, payload
    as JSON text, answer)`` of every row, without checking again."""
    if kind == "csv":
        header, rows = csv_rows(path)
        col = {h: i for i, h in enumerate(header)}
        i_id, i_cat, i_ans = col["id"], col.get("category"), col.get("answer")
        keys = [(i, _json_str(h) + ": ") for i, h in enumerate(header) if h not in RESERVED]
        for line, row in rows:
            payload = "{" + ", ".join([k + _json_str(row[i]) for i, k in keys]) + "}"
            yield (line, row[i_id], "" if i_cat is None else row[i_cat], payload,
                   (row[i_ans] if i_ans is not None else None) if gold else None)
        return
    for line, raw in jsonl_lines(path):
        obj = json.loads(raw)
        ext = name(obj.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        category = name(obj.get("category"), path, line, "category", required=False,
                        max_length=MAX_TEXT)
        answer = (name(obj.get("answer"), path, line, "answer", required=True,
                       max_length=MAX_TEXT) if gold else None)
        payload = {k: v for k, v in obj.items() if k not in RESERVED}
        if isinstance(payload.get("payload"), dict):
            payload = payload["payload"]
        yield line, ext, category, json.dumps(payload), answer


class _Present:
    """The ids already in a project, as hashes (``hash -> is_gold``, or None where two
    ids of both kinds share one); a hit is confirmed by asking the database."""

    def __init__(self, session: Session, project: Project) -> None:
        self.session, self.project_id = session, project.id
        self.kind: dict[int, bool | None] = {}
        result = session.execute(select(Task.external_id, Task.is_gold)
                                 .where(Task.project_id == project.id)
                                 .execution_options(yield_per=50_000))
        for ext, is_gold in result:
            h = hash(ext)
            if h in self.kind and self.kind[h] != bool(is_gold):
                self.kind[h] = None
            else:
                self.kind[h] = bool(is_gold)

    def confirm(self, ids: Iterable[str]) -> dict[str, bool]:
        """Those of ``ids`` (hits) that the project has, with their kind."""
        ids = list(ids)
        out: dict[str, bool] = {}
        for start in range(0, len(ids), CONFIRM):
            part = ids[start:start + CONFIRM]
            out.update((e, bool(g)) for e, g in self.session.execute(
                select(Task.external_id, Task.is_gold)
                .where(Task.project_id == self.project_id, Task.external_id.in_(part))))
        return out

    def sort(self, rows: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], dict[str, bool]]:
        """Of ``rows`` (line, id): those that may be present, and those that are."""
        if not self.kind:
            return [], {}
        hits = [r for r in rows if hash(r[1]) in self.kind]
        return hits, (self.confirm(e for _, e in hits) if hits else {})


def load_tasks(session: Session, project: Project, path: str | Path, *, gold: bool = False,
               fmt: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> LoadResult:
    """Validate ``path`` fully (first pass), then insert its new rows into ``project`` in
    the caller's transaction (second pass; commit or roll back is the caller's).
    ``progress(written, total)`` is called as rows are written."""
    path = Path(path)
    kind = detect_format(path, fmt)
    present = _Present(session, project)
    # an id already loaded as the other kind is not "already present": skipping it would
    # leave gold loaded from task ids with no gold at all (and the reverse)
    clash: list[tuple[int, str]] = []
    n_clash = skipped = 0
    pending: list[tuple[int, str]] = []

    def settle() -> None:
        nonlocal n_clash, skipped
        _hits, there = present.sort(pending)
        for line, ext in pending:
            if ext in there:
                if there[ext] != gold:
                    n_clash += 1
                    if len(clash) < 5:
                        clash.append((line, ext))
                else:
                    skipped += 1
        pending.clear()

    def each(line: int, ext: str) -> None:
        if present.kind and hash(ext) in present.kind:
            pending.append((line, ext))
            if len(pending) >= CHUNK:
                settle()

    rows = check_task_file(path, gold=gold, label_set=project.labels, fmt=fmt, each=each)
    settle()
    if n_clash:
        what, other = ("gold questions", "tasks") if gold else ("tasks", "gold questions")
        shown = ", ".join(repr(e) for _, e in clash) + (", ..." if n_clash > 5 else "")
        raise Conflict(
            f"{path}: {n_clash} of these {what} have ids already loaded as {other} of "
            f"{project.name!r} ({shown}; first on line {clash[0][0]}); nothing was loaded. "
            + ("A task does not become a gold question by loading it again: make loaded "
               f"tasks gold with 'labelq gold mark {project.name} --file FILE', or give new "
               "gold questions ids of their own (e.g. prefix them with 'gold-')."
               if gold else "Give these tasks ids of their own."), project=project.name)
    total = rows - skipped
    seq0 = session.exec(select(func.coalesce(func.max(Task.seq) + 1, 0))
                        .where(Task.project_id == project.id)).one()
    conn = session.connection()
    writer = _bulk_writer(conn)
    created: Any = utcnow()
    ts_proc = Task.__table__.c.created.type.bind_processor(conn.dialect)
    if ts_proc:
        created = ts_proc(created)
    written = 0
    batch: list[_Row] = []

    def flush() -> None:
        nonlocal written
        if present.kind:
            _hits, there = present.sort([(r[0], r[1]) for r in batch])
            keep = [r for r in batch if r[1] not in there]
        else:
            keep = batch
        pid = project.id
        writer([(pid, seq0 + written + k, ext, category, payload, gold, answer, created)
                for k, (_line, ext, category, payload, answer) in enumerate(keep)])
        written += len(keep)
        batch.clear()
        if progress and keep:
            progress(written, total)

    for row in _rows(path, kind, gold):
        batch.append(row)
        if len(batch) >= CHUNK:
            flush()
    if batch:
        flush()
    return LoadResult(inserted=written, skipped_existing=rows - written, rows=rows)
