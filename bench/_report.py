"""Write one benchmark's section of docs/benchmarks.md, leaving the other sections alone.

Each bench script owns the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``;
``write_section(name, markdown)`` replaces it (or appends it) so scripts can run in any order.
"""

from __future__ import annotations

import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEvery section is written by the script named in it; rerun the command to refresh it.\n"


def machine() -> str:
    import os
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{datetime.now(timezone.utc):%Y-%m-%d}")


def write_section(name: str, markdown: str, doc: Path = DOC) -> None:
    text = doc.read_text() if doc.exists() else HEADER
    block = f"<!-- bench:{name} -->\n{markdown.rstrip()}\n<!-- /bench:{name} -->"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->",
                         re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def command_line() -> str:
    return "python " + " ".join(sys.argv)
