"""The binary form of a policy-state snapshot: arrays as their raw bytes.

At 1,000,000 tasks a process's state load (its first decision after a start) read the
zlib-JSON snapshot's million-element lists with orjson, turned them into numpy arrays, and
read the view's million task rows from SQL: about 3 s of CPU on this machine, more under
load, and the first ``next`` of every process waited for it (issue 36). In this form the
arrays are their bytes: reading one back is a copy; and the snapshot carries the view's
task arrays too (category, gold, gold answer, SQL id by task seq), so a load reads no
task rows from SQL either (:meth:`labelq.live.hotstate.StateCache._load` says when they
may be used).

Layout: :data:`MAGIC`, one byte saying how the header is written (``o`` orjson, ``j`` the
standard library: a header with a NaN or an infinity, which orjson would write as
``null``), the header's length (4 bytes, little-endian), the header, then each array's
bytes at an offset aligned to 16. The header is a JSON object (the caller's envelope and
trees) in which every numpy array is ``{"__lq_ndarray__": i}``, ``i`` indexing
``"arrays"``: ``[dtype, shape, offset, stored dtype]`` of each (an integer array is stored
in the narrowest integer type that holds its values, and read back in its own). Only dicts are walked for arrays; a list
goes to JSON as it is (numpy scalars and arrays inside it as numbers and lists).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

__all__ = ["MAGIC", "NotBinary", "encode", "decode", "is_binary"]

MAGIC = b"LQS2"
_ND = "__lq_ndarray__"
_ALIGN = 16
_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_HEAD = len(MAGIC) + 5  # magic, kind, length


class NotBinary(Exception):
    """A tree the binary form does not take (an array of Python objects)."""


def is_binary(blob: bytes) -> bool:
    return blob.startswith(MAGIC)


def json_default(obj: Any) -> Any:
    """numpy arrays and scalars as JSON values (the ``default=`` of json and orjson)."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def encode(tree: dict[str, Any]) -> bytes:
    """``tree`` (a dict) in the binary form; raises :class:`NotBinary` for an object
    array, and ``TypeError`` for what JSON cannot hold."""
    arrays: list[np.ndarray] = []

    def walk(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise NotBinary(f"an array of {obj.dtype}")
            arrays.append(obj)
            return {_ND: len(arrays) - 1}
        if isinstance(obj, dict):
            return {k: walk(v) for k, v in obj.items()}
        return obj

    head = walk(tree)
    table: list[list[Any]] = []
    stored: list[np.ndarray] = []
    offset = 0
    for a in arrays:
        small = _narrowed(a)
        stored.append(small)
        table.append([a.dtype.str, list(a.shape), offset, small.dtype.str])
        offset += -(-small.nbytes // _ALIGN) * _ALIGN
    head["arrays"] = table
    try:
        raw = orjson.dumps(head, default=json_default, option=_ORJSON)
        kind = b"o"
        # orjson writes NaN and the infinities as null, as it writes None: a null read
        # back as anything else (NaN != NaN) means one of those, which the standard
        # library keeps (a tuple reads back as a list: the same)
        if b"null" in raw and orjson.loads(raw) != head:
            raise TypeError("NaN or infinity")
    except (TypeError, ValueError):  # (orjson.JSONEncodeError is a TypeError; ValueError:
        # an array inside a list, which the comparison cannot tell equal)
        raw = json.dumps(head, separators=(",", ":"), default=json_default).encode()
        kind = b"j"
    start = _HEAD + len(raw)
    base = start + (-start % _ALIGN)
    out = bytearray(base + offset)
    out[:_HEAD] = MAGIC + kind + len(raw).to_bytes(4, "little")
    out[_HEAD:start] = raw
    for a, row in zip(stored, table, strict=True):
        if a.nbytes:
            out[base + row[2]:base + row[2] + a.nbytes] = a.tobytes()
    return bytes(out)


def _narrowed(a: np.ndarray) -> np.ndarray:
    """``a`` (contiguous) in the narrowest integer type that holds its values, for an
    integer array (task categories, gold answers, label counts, SQL ids: a byte or four
    where int64 takes eight, a third of a 1M-task snapshot's bytes to send and copy)."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind not in "iu" or a.size == 0 or a.dtype.itemsize == 1:
        return a
    lo, hi = int(a.min()), int(a.max())
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return a if np.dtype(t).itemsize >= a.dtype.itemsize else a.astype(t)
    return a


def decode(blob: bytes) -> dict[str, Any]:
    """What :func:`encode` was given (arrays as writable numpy arrays of their own types,
    tuples as lists)."""
    if not is_binary(blob):
        raise ValueError("not a binary snapshot")
    kind = blob[len(MAGIC):len(MAGIC) + 1]
    n = int.from_bytes(blob[len(MAGIC) + 1:_HEAD], "little")
    start = _HEAD + n
    raw = blob[_HEAD:start]
    head: dict[str, Any] = orjson.loads(raw) if kind == b"o" else json.loads(raw)
    base = start + (-start % _ALIGN)
    arrays = []
    for dtype, shape, off, as_stored in head.pop("arrays"):
        dt, st = np.dtype(dtype), np.dtype(as_stored)
        count = int(np.prod(shape, dtype=np.int64))
        if not count:
            arrays.append(np.zeros(shape, dtype=dt))
            continue
        got = np.frombuffer(blob, dtype=st, count=count, offset=base + off)
        # a copy of its own either way (frombuffer's is read-only, and policies update
        # their states in place)
        arrays.append((got.astype(dt) if st != dt else got.copy()).reshape(shape))

    def walk(obj: Any) -> Any:
        if isinstance(obj, dict):
            if len(obj) == 1 and _ND in obj:
                return arrays[obj[_ND]]
            return {k: walk(v) for k, v in obj.items()}
        return obj
    out: dict[str, Any] = walk(head)
    return out
