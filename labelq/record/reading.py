"""One strict reader for every label and task file labelq reads.

``labelq tasks load``, ``gold load`` and ``gold mark --file`` (:mod:`labelq.record.loading`),
``labelq aggregate`` and ``simulate --data`` (:mod:`labelq.datasets`) read their files
here, so a file is refused the same way wherever it is given: a
:class:`~labelq.errors.FileFormatError` (exit code 3) naming the file, the line and, where
there is one, the field — before anything is written.

* **Text**: UTF-8 (a BOM is dropped); a byte that is not UTF-8 is named with the line it
  is on. Files are read as a stream (:func:`records`, :func:`csv_rows`,
  :func:`jsonl_lines`), a chunk at a time: the line of a bad byte is counted from the
  newlines of the chunks before it, not guessed from a buffer.
* **CSV** is read strictly: a quote left open is named by the line it opened on (a lenient
  reader merged the rest of the file into one field), a wrong column count, a NUL anywhere,
  a field over :data:`MAX_FIELD` characters (1 MiB; the csv module's own limit of 128 KiB
  was a traceback).
* **JSONL**: one JSON object a line, lines ending at ``\\n`` only (U+2028 or U+0085 inside a
  string are text). Refused where the standard library would take them or fail with a
  traceback: ``NaN`` and ``Infinity`` (not JSON; SQLite stored them as non-JSON and
  PostgreSQL refused them), a number too large for a float (it became ``inf``), an
  integer beyond 64 bits (or of 4,300 digits and more: Python refuses to convert it), a
  lone UTF-16 surrogate (``"\\ud800"``: not a character; no database or UTF-8 encoder
  takes it), nesting deeper than :data:`MAX_DEPTH` (5,000 levels were a RecursionError),
  a NUL in a key or a string, a key given twice in one object (the standard library keeps
  the last one: refused, naming the line and the key), a field (a top-level value) over
  :data:`MAX_FIELD` characters of JSON text (1 MiB, as a CSV field).
* **Names** (ids, categories, answers, workers, labels: :func:`name`): a string (or a JSON
  number, read as its text), without control characters, within a length, and without
  surrounding whitespace — refused, not stripped (``" t1"`` and ``"t1"`` are two ids to
  a database, and a silent strip loaded a different id from the one in the file).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, InputError

__all__ = ["read_text", "text_chunks", "csv_records", "csv_rows", "jsonl_records",
           "jsonl_lines", "records", "name", "detect_format", "check_value", "MAX_FIELD",
           "MAX_DEPTH", "PLAIN"]

MAX_FIELD = 1 << 20  # characters of one CSV field, and of one JSONL field's JSON text
MAX_DEPTH = 64  # nesting of JSON objects and arrays in one line
MAX_INT = 2**63  # JSON integers: within 64 bits, as PostgreSQL's jsonb, orjson and most
# clients take them exactly (a longer number goes in a string)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# a name that passes every check of name() (the common case, matched at once; the loader
# checks a batch of plain ids and categories with it)
PLAIN = re.compile(r"[^\s\x00-\x1f\x7f\ud800-\udfff]"
                    r"(?:[^\x00-\x1f\x7f\ud800-\udfff]*[^\s\x00-\x1f\x7f\ud800-\udfff])?")

csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD + 1))


def read_text(path: str | Path) -> str:
    """The file as text: UTF-8 (a BOM dropped); a byte that is not UTF-8 is named with the
    line it is on. An unreadable file (missing, a directory) is an :class:`InputError`."""
    path = Path(path)
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


def detect_format(path: Path, fmt: str | None) -> str:
    """``csv`` or ``jsonl``: ``fmt`` if given, else from the file's extension."""
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


def records(path: str | Path, fmt: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record)`` of a CSV or JSONL file (the format from ``fmt`` or the name),
    read as a stream: the file is decoded a chunk at a time, so memory does not grow with
    its size (a byte that is not UTF-8 is still named with its line)."""
    path = Path(path)
    kind = detect_format(path, fmt)
    if kind == "csv":  # (as csv_records: rows as {column: value})
        seen_nul = [False]
        return _csv_records(path, _universal_lines(text_chunks(path), seen_nul), seen_nul)
    return _jsonl_records(path, _lf_lines(text_chunks(path)))


CHUNK_BYTES = 1 << 18


def text_chunks(path: str | Path) -> Iterator[str]:
    """The file as text, a chunk (about :data:`CHUNK_BYTES`) at a time: UTF-8, a BOM
    dropped; a byte that is not UTF-8 is named with the line it is on. The file is opened
    at once (an unreadable file is an :class:`InputError` here, not at the first read)."""
    path = Path(path)
    try:
        fh = path.open("rb")
        first = fh.read(CHUNK_BYTES)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}", path=str(path)) from exc
    return _decode_chunks(path, fh, first)


def _decode_chunks(path: Path, fh: Any, first: bytes) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    newlines = 0  # before the decoder's input (its pending bytes hold no newline)
    chunk = first[3:] if first.startswith(codecs.BOM_UTF8) else first
    with fh:
        while True:
            final = not chunk
            try:
                text = decoder.decode(chunk, final)
            except UnicodeDecodeError as exc:
                raw = exc.object
                line = newlines + raw[: exc.start].count(b"\n") + 1
                raise FileFormatError(str(path), line, None,
                                      f"bad encoding: byte {raw[exc.start]:#04x} is not UTF-8"
                                      ) from exc
            newlines += chunk.count(b"\n")
            if text:
                yield text
            if final:
                return
            chunk = fh.read(CHUNK_BYTES)


def _lf_lines(chunks: Iterable[str]) -> Iterator[str]:
    """Lines split at ``\\n`` only, as ``text.split("\\n")`` (without the ends). The start
    of a line not ended yet is kept as pieces, joined once when it ends: adding each chunk
    to it copied a long line once per chunk (a 64 MiB line took 10 s, 256 MiB minutes)."""
    carry: list[str] = []
    for chunk in chunks:
        if not chunk:
            continue
        if "\n" not in chunk:
            carry.append(chunk)
            continue
        parts = chunk.split("\n")
        if carry:
            carry.append(parts[0])
            parts[0] = "".join(carry)
        carry = [parts.pop()]
        yield from parts
    yield "".join(carry)


def _universal_lines(chunks: Iterable[str], seen_nul: list[bool]) -> Iterator[str]:
    """Lines as ``io.StringIO(text, newline="")`` gives them (ends kept; ``\\r\\n``,
    ``\\r`` and ``\\n`` end a line), a chunk at a time. ``seen_nul[0]`` is set once a NUL
    has been read (before any line holding it is given out). A line not ended yet is kept
    as pieces, joined once, as in :func:`_lf_lines`."""
    carry: list[str] = []
    for chunk in chunks:
        if not chunk:
            continue
        if not seen_nul[0] and "\x00" in chunk:
            seen_nul[0] = True
        if "\n" not in chunk and "\r" not in chunk and not (carry and carry[-1][-1:] == "\r"):
            carry.append(chunk)  # no line ends in it, nor does the one carried end at "\r"
            continue
        text = "".join(carry) + chunk if carry else chunk
        lines = io.StringIO(text, newline="").readlines()
        last = lines[-1] if lines else ""
        # a line without its end, or ending at "\r" (a "\n" may follow in the next chunk)
        carry = [lines.pop()] if last and not last.endswith("\n") else []
        yield from lines
    if carry:
        yield "".join(carry)


def csv_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows as ``{column: value}`` with the line each record starts on (a record may span
    lines: a quoted field with newlines). The header's names are stripped of surrounding
    spaces and must be unique; blank lines are skipped."""
    return _csv_records(path, io.StringIO(text, newline=""), ["\x00" in text])


def csv_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """A CSV file read as a stream: its header (checked as :func:`csv_records` checks it)
    and its rows as ``(line, [values])`` in the header's order, checked as there."""
    seen_nul = [False]
    lines = _universal_lines(text_chunks(path), seen_nul)
    reader = csv.reader(lines, strict=True)
    header = _csv_header(path, reader)
    return header, _csv_lists(path, reader, header, seen_nul)


def _csv_records(path: Path, lines: Iterable[str], seen_nul: list[bool]
                 ) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.reader(lines, strict=True)
    header = _csv_header(path, reader)
    for start, row in _csv_lists(path, reader, header, seen_nul):
        yield start, dict(zip(header, row, strict=True))


def _csv_header(path: Path, reader: Any) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise FileFormatError(str(path), 1, None, "file is empty") from None
    except csv.Error as exc:
        raise FileFormatError(str(path), 1, None, _csv_problem(exc, 1, reader.line_num)) \
            from exc
    header = [h.strip() for h in header]
    for h in header:
        _check_string(h, path, 1, h)
    if len(set(header)) != len(header):
        raise FileFormatError(str(path), 1, None, f"duplicate column name in header {header}")
    return header


def _csv_lists(path: Path, reader: Any, header: list[str], seen_nul: list[bool]
               ) -> Iterator[tuple[int, list[str]]]:
    width = len(header)
    end = reader.line_num
    while True:
        start = end + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise FileFormatError(str(path), start, None,
                                  _csv_problem(exc, start, reader.line_num)) from exc
        end = reader.line_num
        # a blank line (every cell only spaces, if any)
        if not row or (not row[0].strip() and not "".join(row).strip()):
            continue
        if len(row) != width:
            raise FileFormatError(str(path), start, None,
                                  f"expected {width} columns, found {len(row)}")
        if seen_nul[0]:
            for column, value in zip(header, row, strict=True):
                if "\x00" in value:
                    _check_string(value, path, start, column)
        yield start, row


def _csv_problem(exc: csv.Error, start: int, stop: int) -> str:
    said = str(exc)
    if "unexpected end of data" in said:
        return "unterminated quote: the quoted field opened on this line is never closed"
    if "expected after" in said:
        return (f"malformed CSV: a quoted field opened on this line is closed on line {stop} "
                f"and followed by more text ({exc}); a quote inside a quoted field is "
                'written twice ("")')
    if "field larger than field limit" in said:
        return (f"a field longer than {MAX_FIELD} characters (1 MiB) — a quote left open "
                "earlier, or data that does not belong in one field")
    return f"malformed CSV: {exc}"


class _Refused:
    """A JSON value the parser met and labelq refuses (``NaN``, a float out of range, an
    integer beyond 64 bits): kept in place, so that the check of the record names the
    field it is in."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _constant(word: str) -> Any:
    return _Refused(f"{word} is not JSON (write null, or the number as a string)")


def _float(text: str) -> Any:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"the number {text[:40]} is too large for a float")
    return value


def _int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    if digits > 19 or not -MAX_INT <= int(text) < MAX_INT:
        shown = text if digits <= 30 else f"{text[:20]}... ({digits} digits)"
        return _Refused(f"the integer {shown} does not fit in 64 bits (write it as a string)")
    return int(text)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys and values as a dict, or :class:`_DuplicateKey` for a key given
    twice (``json.loads`` would keep the last one)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _field_size(value: Any) -> int:
    """Characters of a field's JSON text (a string: its own length)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (dict, list)):
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                              default=lambda _v: None))
    return 0


def _depth(raw: str) -> int:
    """The deepest nesting of objects and arrays in a JSON text (outside strings)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest


def jsonl_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """One JSON object a line (blank lines skipped), strictly: see the module's notes."""
    # only "\n" ends a line: str.splitlines() also splits on U+2028, U+0085 and other
    # separators that JSON allows unescaped inside strings
    return _jsonl_records(path, text.split("\n"))


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """A JSONL file read as a stream: ``(line, text)`` of its lines that are not blank,
    split as :func:`jsonl_records` splits them, not parsed (for a second pass over a file
    already checked)."""
    for line, raw in enumerate(_lf_lines(text_chunks(path)), start=1):
        raw = raw.removesuffix("\r")
        if raw.strip():
            yield line, raw


def _jsonl_records(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, raw in enumerate(lines, start=1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        if ("[" in raw or "{" in raw) and raw.count("[") + raw.count("{") > MAX_DEPTH:
            if _depth(raw) > MAX_DEPTH:
                raise FileFormatError(str(path), line, None,
                                      f"nested deeper than {MAX_DEPTH} levels")
        try:
            obj = json.loads(raw, parse_constant=_constant, parse_float=_float,
                             parse_int=_int, object_pairs_hook=_pairs)
        except _DuplicateKey as exc:
            raise FileFormatError(str(path), line, exc.key,
                                  f"the key {exc.key!r} is given twice in one object (JSON "
                                  "readers keep one of them, silently): give it once") from None
        except json.JSONDecodeError as exc:
            raise FileFormatError(str(path), line, None,
                                  f"broken JSON: {exc.msg} at column {exc.colno}") from exc
        except (ValueError, RecursionError) as exc:  # (the hooks leave none: a safety net)
            raise FileFormatError(str(path), line, None, f"not accepted: {exc}") from exc
        if not isinstance(obj, dict):
            raise FileFormatError(str(path), line, None,
                                  f"expected a JSON object, got {type(obj).__name__}")
        for key, value in obj.items():
            check_value(value, path, line, key)
            if len(raw) > MAX_FIELD and _field_size(value) > MAX_FIELD:
                raise FileFormatError(str(path), line, key,
                                      f"longer than {MAX_FIELD} characters (1 MiB) of JSON "
                                      f"text ({_field_size(value)})")
        yield line, obj


def check_value(value: Any, path: Path, line: int, field: str) -> None:
    """No NUL and no lone surrogate in any string or key of ``value`` (a record's field):
    PostgreSQL cannot store a NUL, and a surrogate is not a character UTF-8 can encode."""
    if isinstance(value, str):
        _check_string(value, path, line, field)
    elif isinstance(value, _Refused):
        raise FileFormatError(str(path), line, field, value.why)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_string(k, path, line, field, "a key")
            check_value(v, path, line, field)
    elif isinstance(value, list):
        for v in value:
            check_value(v, path, line, field)


def _check_string(s: str, path: Path, line: int, field: str, what: str = "") -> None:
    if "\x00" in s:
        raise FileFormatError(str(path), line, field,
                              f"{what + ' ' if what else ''}contains a NUL character "
                              "(control character '\\x00')".strip())
    bad = _SURROGATE.search(s)
    if bad:
        raise FileFormatError(str(path), line, field,
                              f"{what + ' ' if what else ''}contains a lone surrogate "
                              f"{bad.group()!r} (not a character)".strip())


def name(value: Any, path: Path, line: int, field: str, *, required: bool,
         max_length: int) -> str:
    """A name field's value (an id, a category, an answer, a worker, a label): a string,
    or a JSON number read as its text; no control characters; at most ``max_length``
    characters; no surrounding whitespace (refused, naming the field, not stripped). An
    empty value is ``""`` unless ``required``."""
    if type(value) is str and len(value) <= max_length and PLAIN.fullmatch(value):
        return value
    if value is None or value == "":
        if required:
            raise FileFormatError(str(path), line, field, "missing value")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FileFormatError(str(path), line, field,
                              f"must be a string or number, got {_json_type(value)}")
    text = value if isinstance(value, str) else json.dumps(value)
    if not text.strip():
        if required:
            raise FileFormatError(str(path), line, field, "missing value (only spaces)")
        raise FileFormatError(str(path), line, field, "only spaces (leave it empty)")
    if text != text.strip():
        raise FileFormatError(str(path), line, field,
                              f"{_short(text)} has spaces around it: ids and names are "
                              "taken as written, not trimmed — remove them from the file")
    bad = _CONTROL.search(text)
    if bad:
        raise FileFormatError(str(path), line, field,
                              f"control character {bad.group()!r} at position {bad.start() + 1}")
    _check_string(text, path, line, field)
    if len(text) > max_length:
        raise FileFormatError(str(path), line, field,
                              f"longer than {max_length} characters ({len(text)})")
    return text


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
