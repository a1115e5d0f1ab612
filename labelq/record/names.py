"""The names labelq takes as given: a project's, an annotator's handle, a model's.

Its own module, below :mod:`.projects` and :mod:`.predictions`, which both check names
(issue 43: ``predictions`` imported ``check_name`` from ``projects``, which imports
``predictions`` back to delete a project's predictions).
"""

from __future__ import annotations

import re

from ..errors import InputError

__all__ = ["NAME_PATTERN", "check_name"]

# Project names and worker handles travel in URLs, file names and log lines: letters and
# digits first, then also . _ @ -, at most 64 characters (no '/', '..' paths, markup, spaces).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


def check_name(value: str, what: str) -> str:
    """``value`` if it matches :data:`NAME_PATTERN`; else an InputError naming it. Spaces
    around it are refused, not stripped: the name used must be the name given."""
    if value != value.strip() and _NAME.fullmatch(value.strip()):
        raise InputError(f"{what} {value!r} has spaces around it: names are taken as "
                         "written, not trimmed", field=what)
    if not _NAME.fullmatch(value):
        raise InputError(f"{what} {value!r} is not allowed: use 1 to 64 letters, digits and "
                         ". _ @ -, starting with a letter or digit", field=what)
    return value
