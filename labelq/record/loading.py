"""Loading tasks and gold questions from CSV or JSONL, all or nothing, by streaming.

A file is validated completely before anything is written (read by the one strict reader
of every label and task file, :mod:`labelq.record.reading`), in a first pass over it that
keeps only the hashes of the ids it has seen (a duplicate hash is confirmed by reading the
file again up to that line); a second pass reads it again and inserts its new rows in
batches (PostgreSQL ``COPY``, SQLite ``executemany``; into an SQLite ``task`` table holding
no row, its secondary indexes are dropped and built again after the insert), all in the
caller's one transaction. Memory does not grow with the file beyond those hashes. Any
malformed row — missing or duplicate id, a gold answer not in the label set, broken JSON,
bad encoding, a wrong column count, a quote left open (the error names the line the quote
opened on), a control character in an id or category, an id with spaces around it, an id
over 500 or a category over 200 characters, a NUL or a lone surrogate anywhere, ``NaN``, an
integer beyond 64 bits, nesting over 64 levels — raises
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
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Index, Table, func, insert
from sqlmodel import Session, SQLModel, col, select

from ..errors import Conflict, FileFormatError
from .models import Project, Task, utcnow
from .reading import PLAIN, check_value, csv_rows, detect_format, jsonl_lines, name, records

if TYPE_CHECKING:
    import numpy as np
    import psycopg
    from numpy.typing import NDArray

__all__ = ["ParsedRow", "parse_task_file", "check_task_file", "load_tasks", "LoadResult"]

RESERVED = ("id", "category", "answer")
CHUNK = 5_000  # rows a batch of the insert
CONFIRM = 500  # ids a query confirming them present
CHECK_ROWS = 256  # CSV rows the first pass checks at a time
MAX_ID = 500  # the columns' lengths (models.Task)
MAX_TEXT = 200


@dataclass(frozen=True)
class ParsedRow:
    line: int
    external_id: str
    category: str
    payload: dict[str, Any]
    answer: str | None


@dataclass(frozen=True)
class LoadResult:
    inserted: int
    skipped_existing: int
    rows: int


_Row = tuple[int, str, str, str, "str | None"]  # line, id, category, payload JSON, answer
# a row as inserted: seq, id, category, payload JSON, answer (the project, is_gold and the
# creation time are the same for every row of a load: :class:`_BulkWriter` adds them)
_Insert = tuple[int, str, str, str, "str | None"]
TASK: Table = SQLModel.metadata.tables["task"]


def _foreign_key_checked_once(conn: Connection, project: Project) -> bool:
    """On PostgreSQL, where the role may (a superuser, or granted SET on the parameter),
    check ``task``'s one foreign key once for the whole load instead of once a row: lock
    the project's row as the per-row check would (``FOR KEY SHARE``: it cannot be deleted
    until the transaction ends), then turn the row triggers off for this transaction
    (``SET LOCAL session_replication_role = replica``, as pg_restore does; ``task`` has
    no trigger but its foreign key's). The per-row check was half the server's time.
    Returns whether they were turned off (turned on again after the insert)."""
    if conn.dialect.name != "postgresql":
        return False
    granted = ("OR has_parameter_privilege('session_replication_role', 'SET')"
               if (conn.dialect.server_version_info or (0,)) >= (15,) else "")
    allowed = conn.exec_driver_sql(
        f"SELECT rolsuper {granted} FROM pg_roles WHERE rolname = current_user").scalar()
    if not allowed:
        return False
    found = conn.exec_driver_sql("SELECT id FROM project WHERE id = %(id)s FOR KEY SHARE",
                                 {"id": project.id}).first()
    if found is None:
        return False
    conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    return True


class _BulkWriter:
    """Inserts rows (:data:`_Insert`) of project ``project_id`` into ``task`` as fast as
    the driver allows, straight to the DBAPI (per-row statement compilation was 2/3 of the
    load time once): ``executemany`` on SQLite, the values every row shares (project,
    is_gold, the creation time as the driver takes it) written into the statement once
    rather than bound for every row; on PostgreSQL (psycopg 3) one ``COPY`` in text format
    kept open across batches, so that the server stores a batch while the next one is read
    — :meth:`pause` ends it before another statement on the connection."""

    def __init__(self, conn: Connection, project_id: int, gold: bool,
                 created: object, source: str | None = None) -> None:
        self.conn = conn
        self.project_id, self.gold, self.created = project_id, gold, created
        # COPY's text format: the columns before seq, between payload and the answer, after
        # (gold loaded as gold is of kind ``loaded``: a sample served on the schedule; its
        # ``gold_source`` the file, ``source``)
        self.kind = "loaded" if gold else None
        self.source = source if gold else None
        self._copy_parts = (f"{project_id}\t", f"\t{'t' if gold else 'f'}\t",
                            f"\t{created}\t{self.kind or _NULL}\t"
                            f"{_NULL if self.source is None else _copy_field(self.source)}\n")
        # SQLite: the creation time as an SQL literal (the adapter made it text)
        self._sqlite_created = ("'" + created.replace("'", "''") + "'"
                                if isinstance(created, str) else None)
        self._sqlite_source = ("NULL" if self.source is None
                               else "'" + self.source.replace("'", "''") + "'")
        self.dialect = conn.dialect
        dbapi = conn.connection.driver_connection
        if dbapi is None:  # pragma: no cover - a connection in use has its driver's
            raise RuntimeError("the connection is closed")
        self.dbapi: Any = dbapi  # sqlite3's or psycopg's connection: the dialect says which
        self._cursor: psycopg.Cursor[Any] | None = None
        self._copy: psycopg.Copy | None = None
        self._copy_cm: AbstractContextManager[psycopg.Copy] | None = None

    def write(self, rows: list[_Insert]) -> None:
        if not rows:
            return
        if self.dialect.name == "sqlite":
            created = self._sqlite_created
            sql = (f"INSERT INTO task ({', '.join(COLUMNS)}) VALUES ({self.project_id}, "
                   f"?, ?, ?, ?, {int(self.gold)}, ?, {created or '?'}, "
                   f"{repr(self.kind) if self.kind else 'NULL'}, {self._sqlite_source})")
            cur = self.dbapi.cursor()
            try:
                cur.executemany(sql, rows if created else
                                [(*r, self.created) for r in rows])
            finally:
                cur.close()
        elif self.dialect.name == "postgresql" and self.dialect.driver == "psycopg":
            if self._copy is None:
                cursor: psycopg.Cursor[Any] = self.dbapi.cursor()
                self._cursor = cursor
                cm = cursor.copy(f"COPY task ({', '.join(COLUMNS)}) FROM STDIN")
                self._copy = cm.__enter__()
                self._copy_cm = cm
            head, middle, tail = self._copy_parts
            self._copy.write("".join([
                f"{head}{seq}\t{_copy_text(ext)}\t{_copy_text(category)}\t"
                f"{_copy_text(payload)}{middle}"
                f"{_NULL if answer is None else _copy_text(answer)}{tail}"
                for seq, ext, category, payload, answer in rows]))
        else:  # any other database: portable executemany
            self.conn.execute(insert(TASK), [
                dict(zip(COLUMNS, (self.project_id, seq, ext, category, json.loads(payload),
                                   self.gold, answer, self.created, self.kind,
                                   self.source),
                     strict=True))
                for seq, ext, category, payload, answer in rows])

    def pause(self, exc: BaseException | None = None) -> None:
        """End the COPY in progress, if any (with ``exc``: abort it)."""
        cm, cursor = self._copy_cm, self._cursor
        if cm is not None and cursor is not None:
            self._copy = self._copy_cm = self._cursor = None
            try:
                cm.__exit__(type(exc) if exc else None, exc, None)
            finally:
                cursor.close()


def _copy_text(value: str) -> str:
    # ids, categories and answers hold no control character, JSON text (ASCII) no raw one
    # either: a backslash is all that COPY's text format needs escaped
    return value.replace("\\", "\\\\") if "\\" in value else value


def _copy_field(value: str) -> str:
    """Any text as a field of COPY's text format (a file's name may hold a tab or a line
    end, which would end the field or the row)."""
    return (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


_NULL = "\\N"


COLUMNS = ("project_id", "seq", "external_id", "category", "payload", "is_gold",
           "gold_answer", "created", "gold_kind", "gold_source")


def _task_table_empty(conn: Connection) -> bool:
    """On SQLite, whether ``task`` holds no row at all (then :func:`_defer_indexes`)."""
    return (conn.dialect.name == "sqlite"
            and conn.exec_driver_sql("SELECT 1 FROM task LIMIT 1").first() is None)


def _defer_indexes(conn: Connection) -> list[Index]:
    """Drop ``task``'s secondary indexes that hold no constraint, which
    :func:`_restore_indexes` builds again after the load, in the same transaction (one
    sort instead of a B-tree insert a row); returns those dropped. Only inside a
    transaction already open: sqlite3 opens one at the first insert, not before a DROP
    (which it would commit at once, whatever the caller does after)."""
    if not getattr(conn.connection.driver_connection, "in_transaction", False):
        return []
    dropped = sorted((ix for ix in TASK.indexes if not ix.unique), key=lambda ix: str(ix.name))
    for ix in dropped:
        ix.drop(conn)
    return dropped


def _restore_indexes(conn: Connection, dropped: list[Index]) -> None:
    for ix in dropped:
        ix.create(conn)


def _missing_id(path: Path, header: list[str]) -> FileFormatError:
    return FileFormatError(str(path), 1, "id", f"missing column; header is {header}")


def _check_csv(path: Path, gold: bool, allowed: set[str], seen: _SeenIds,
               each: Callable[[int, str], None] | None) -> int:
    """First pass over a CSV file: every row checked as the loader checks it, its id added
    to ``seen`` (before the row's other fields are checked: a duplicate id on the line
    comes first); returns the number of rows.

    Rows are taken :data:`CHECK_ROWS` at a time: a batch of plain ids and categories (the
    common case: strings within their lengths that
    :data:`~labelq.record.reading.PLAIN` matches; each distinct category once) is taken
    as a whole; any other batch is checked row by row, in file order, by
    :func:`~labelq.record.reading.name`, which names the first problem (or takes the
    value: an empty category). An error of the reader itself (a malformed line) is raised
    once the rows before it are checked, so that the first bad line is the one named."""
    header, rows = csv_rows(path)
    col = {h: i for i, h in enumerate(header)}
    i_id, i_cat, i_ans = col.get("id"), col.get("category"), col.get("answer")
    if i_id is None:
        for _ in rows:  # (a file of no rows is "no rows to load")
            raise _missing_id(path, header)
        return 0
    plain = PLAIN.fullmatch
    hashes, lines = seen.hashes, seen.lines
    n = 0
    reader_error: list[FileFormatError] = []
    source = _until_error(rows, reader_error)
    while chunk := list(islice(source, CHECK_ROWS)):
        ids = [row[i_id] for _line, row in chunk]
        categories = set() if i_cat is None else {row[i_cat] for _line, row in chunk}
        categories.discard("")
        if (not gold and max(map(len, ids)) <= MAX_ID and all(map(plain, ids))
                and all(len(c) <= MAX_TEXT and plain(c) for c in categories)):
            hashes.extend(map(hash, ids))
            lines.extend([line for line, _row in chunk])
            n += len(chunk)
            if each is not None:
                for (line, _row), ext in zip(chunk, ids, strict=True):
                    each(line, ext)
            if len(hashes) >= seen.BLOCK:
                seen.check()
            continue
        for line, row in chunk:  # a batch with something to name: row by row
            ext = name(row[i_id], path, line, "id", required=True, max_length=MAX_ID)
            seen.add(line, ext)
            n += 1
            if each is not None:
                each(line, ext)
            if i_cat is not None:
                name(row[i_cat], path, line, "category", required=False, max_length=MAX_TEXT)
            if gold:
                answer = name(None if i_ans is None else row[i_ans], path, line, "answer",
                              required=True, max_length=MAX_TEXT)
                if allowed and answer not in allowed:
                    raise FileFormatError(str(path), line, "answer",
                                          f"{answer!r} is not in the label set "
                                          f"{sorted(allowed)}")
        # the payload's values are strings of UTF-8 text (no lone surrogate) whose NULs
        # the reader refused: check_value has nothing left to find in them
    if reader_error:
        raise reader_error[0]
    return n


def _until_error(rows: Iterator[tuple[int, list[str]]], error: list[FileFormatError]
                 ) -> Iterator[tuple[int, list[str]]]:
    """``rows`` until the reader raises: the error is kept in ``error``, not raised."""
    try:
        yield from rows
    except FileFormatError as exc:
        error.append(exc)


def _check_records(path: Path, kind: str, gold: bool, allowed: set[str], seen: _SeenIds,
                   each: Callable[[int, str], None] | None) -> int:
    """First pass over a JSONL file, as :func:`_check_csv` over a CSV one."""
    n = 0
    for line, obj in records(path, kind):
        ext = name(obj.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        seen.add(line, ext)
        _finish(path, kind, line, ext, obj, gold, allowed)
        n += 1
        if each is not None:
            each(line, ext)
    return n


def _finish(path: Path, kind: str, line: int, ext: str, row: dict[str, Any], gold: bool,
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


def _id_at(path: Path, kind: str, at: int) -> tuple[str, int | None]:
    """The id on line ``at`` and the first line before it holding the same id, if any
    (the second check of a duplicate hash: the file read again, up to there)."""
    first: dict[str, int] = {}
    for line, ext in _ids(path, kind):
        if line == at:
            return ext, first.get(ext)
        first.setdefault(ext, line)
    raise AssertionError(f"no row on line {at}")  # pragma: no cover


def _ids(path: Path, kind: str) -> Iterator[tuple[int, str]]:
    """``(line, id)`` of the rows of a file read up to here, one row at a time (not a
    batch: the file may be malformed just after the row looked for)."""
    if kind == "csv":
        header, rows = csv_rows(path)
        i_id = header.index("id")
        for line, row in rows:
            yield line, row[i_id]
        return
    for line, raw in jsonl_lines(path):
        obj = json.loads(raw)
        yield line, name(obj.get("id"), path, line, "id", required=True, max_length=MAX_ID)


class _SeenIds:
    """The ids a pass has seen, as 64-bit hashes (8 bytes an id, in sorted numpy blocks);
    a repeated hash is confirmed by reading the file again (:func:`_id_at`). Checked a
    block at a time: :meth:`check` raises the duplicate that comes first in the file.
    Checked blocks are merged as a binary counter merges (two of one size make one of
    twice the size), so that a block is looked up in a few sorted arrays, not in one
    array per block before it (the lookups grew with the square of the rows)."""

    BLOCK = 1 << 16

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.blocks: list[NDArray[np.int64]] = []  # sorted, each under half the one before
        self.hashes: list[int] = []
        self.lines: list[int] = []

    def add(self, line: int, ext: str) -> None:
        self.hashes.append(hash(ext))
        self.lines.append(line)
        if len(self.hashes) >= self.BLOCK:
            self.check()

    def check(self) -> None:
        """Raise on the first duplicate id among the rows added so far."""
        import numpy as np

        if not self.hashes:
            return
        arr = np.array(self.hashes, dtype=np.int64)
        order = np.argsort(arr, kind="stable")
        ordered = arr[order]
        repeated = np.zeros(len(arr), dtype=bool)
        for block in self.blocks:
            at = np.searchsorted(block, ordered).clip(max=len(block) - 1)
            repeated[order[block[at] == ordered]] = True
        same = ordered[1:] == ordered[:-1]
        repeated[order[1:][same]] = True  # all but the first of equal hashes in the block
        for i in np.flatnonzero(repeated):  # in file order
            ext, first = _id_at(self.path, self.kind, self.lines[i])
            if first is not None:
                self.hashes.clear()  # (checked: not again as the error goes up)
                raise FileFormatError(str(self.path), self.lines[i], "id",
                                      f"duplicate id {ext!r} (first on line {first})")
        self.blocks.append(ordered)
        while len(self.blocks) > 1 and len(self.blocks[-2]) <= 2 * len(self.blocks[-1]):
            last = self.blocks.pop()
            merged = np.concatenate([self.blocks.pop(), last])
            merged.sort(kind="stable")  # two sorted runs: merged in one linear pass
            self.blocks.append(merged)
        self.hashes.clear()
        self.lines.clear()


def check_task_file(path: str | Path, *, gold: bool = False,
                    label_set: list[str] | None = None, fmt: str | None = None,
                    each: Callable[[int, str], None] | None = None) -> int:
    """Validate a whole task or gold file in one streaming pass (raise on the first bad
    row, as :func:`parse_task_file`); return its number of rows. ``each(line, id)`` is
    called for every row whose id is not a duplicate of one before (or may not be: the
    duplicates are confirmed a block at a time, before anything is written)."""
    path = Path(path)
    kind = detect_format(path, fmt)
    allowed = set(label_set or [])
    seen = _SeenIds(path, kind)
    try:
        if kind == "csv":
            n = _check_csv(path, gold, allowed, seen, each)
        else:
            n = _check_records(path, kind, gold, allowed, seen, each)
        seen.check()
    except FileFormatError:
        seen.check()  # a duplicate id on an earlier line (or this one) comes first
        raise
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
            for batch in _batches(path, kind, gold)
            for line, ext, category, payload, answer in batch]


def _batches(path: Path, kind: str, gold: bool) -> Iterator[list[_Row]]:
    """Second pass over a file the first pass found good: ``(line, id, category, payload
    as JSON text, answer)`` of every row, :data:`CHUNK` rows a list, without checking
    again."""
    if kind == "csv":
        yield from _csv_batches(path, gold)
        return
    batch: list[_Row] = []
    for line, raw in jsonl_lines(path):
        obj = json.loads(raw)
        ext = name(obj.get("id"), path, line, "id", required=True, max_length=MAX_ID)
        category = name(obj.get("category"), path, line, "category", required=False,
                        max_length=MAX_TEXT)
        answer = (name(obj.get("answer"), path, line, "answer", required=True,
                       max_length=MAX_TEXT) if gold else None)
        payload = {k: v for k, v in obj.items() if k not in RESERVED}
        inner = payload.get("payload")
        batch.append((line, ext, category,
                      json.dumps(inner if isinstance(inner, dict) else payload), answer))
        if len(batch) >= CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def _csv_batches(path: Path, gold: bool) -> Iterator[list[_Row]]:
    header, rows = csv_rows(path)
    col = {h: i for i, h in enumerate(header)}
    i_id, i_cat, i_ans = col["id"], col.get("category"), col.get("answer")
    keys = [(i, _json_str(h) + ": ") for i, h in enumerate(header) if h not in RESERVED]
    batch: list[_Row] = []
    if len(keys) == 1 and i_cat is not None and not gold:  # the common file, at its fastest
        (i_text, key), = keys
        key = "{" + key
        for line, row in rows:
            batch.append((line, row[i_id], row[i_cat], key + _json_str(row[i_text]) + "}",
                          None))
            if len(batch) >= CHUNK:
                yield batch
                batch = []
    else:
        for line, row in rows:
            payload = "{" + ", ".join([k + _json_str(row[i]) for i, k in keys]) + "}"
            batch.append((line, row[i_id], "" if i_cat is None else row[i_cat], payload,
                          (row[i_ans] if i_ans is not None else None) if gold else None))
            if len(batch) >= CHUNK:
                yield batch
                batch = []
    if batch:
        yield batch


class _Present:
    """The ids already in a project, as hashes (``hash -> is_gold``, or None where two
    ids of both kinds share one); a hit is confirmed by asking the database."""

    def __init__(self, session: Session, project: Project) -> None:
        self.session, self.project_id = session, project.id
        self.kind: dict[int, bool | None] = {}
        result = session.exec(select(col(Task.external_id), col(Task.is_gold))
                              .where(col(Task.project_id) == project.id)
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
            out.update((e, bool(g)) for e, g in self.session.exec(
                select(col(Task.external_id), col(Task.is_gold))
                .where(col(Task.project_id) == self.project_id,
                       col(Task.external_id).in_(part))))
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
    ``progress(written, total)`` is called as rows are written. Gold rows record ``path``
    as given (``str(path)``, not resolved) as their ``gold_source``."""
    source = str(path)[:500]  # gold's ``gold_source``: the file as the caller named it
    path = Path(path)
    kind = detect_format(path, fmt)
    pid = project.id
    if pid is None:
        raise ValueError(f"project {project.name!r} is not in the database yet")
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

    rows = check_task_file(path, gold=gold, label_set=project.labels, fmt=fmt,
                           each=each if present.kind else None)
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
    seq0: int = session.exec(select(func.coalesce(func.max(Task.seq) + 1, 0))
                             .where(col(Task.project_id) == pid)).one()
    conn = session.connection()
    checks_off = _foreign_key_checked_once(conn, project)
    created: object = utcnow()  # as the driver takes it
    ts_proc = TASK.c.created.type.bind_processor(conn.dialect)
    if ts_proc:
        created = ts_proc(created)
    if conn.dialect.name == "sqlite" and isinstance(created, datetime):
        # what sqlite3's adapter would make of it, once rather than for every row
        import sqlite3
        adapt = sqlite3.adapters.get((datetime, sqlite3.PrepareProtocol))
        if adapt is not None:
            created = adapt(created)
    writer = _BulkWriter(conn, pid, gold, created, source)
    # into an empty SQLite table: the secondary indexes dropped once the first batch has
    # opened the transaction, and built again at the end
    may_defer = _task_table_empty(conn)
    deferred: list[Index] = []
    written = 0

    def flush(batch: list[_Row]) -> None:
        nonlocal written, may_defer, deferred
        if present.kind:
            writer.pause()  # the queries below need the connection
            _hits, there = present.sort([(r[0], r[1]) for r in batch])
            keep = [r for r in batch if r[1] not in there]
        else:
            keep = batch
        writer.write([(seq0 + written + k, ext, category, payload, answer)
                      for k, (_line, ext, category, payload, answer) in enumerate(keep)])
        written += len(keep)
        if may_defer and written:
            may_defer = False
            deferred = _defer_indexes(conn)
        if progress and keep:
            progress(written, total)

    try:
        for batch in _batches(path, kind, gold):
            flush(batch)
    except BaseException as exc:
        writer.pause(exc)
        if deferred:  # (the caller's rollback restores them too; this if it commits)
            with suppress(Exception):
                _restore_indexes(conn, deferred)
        raise
    writer.pause()
    _restore_indexes(conn, deferred)
    if checks_off:
        conn.exec_driver_sql("SET LOCAL session_replication_role = origin")
    return LoadResult(inserted=written, skipped_existing=rows - written, rows=rows)
