"""The operator's guide (docs/operator-guide.md) and the README's usage block name only
commands and options the Click CLI has: every `labelq ...` line of their ```bash blocks is
walked through cli/main.py's command tree, so a renamed command or option fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "operator-guide.md", ROOT / "README.md"]

FENCE = re.compile(r"^\s*```(\w*)\s*$")
INLINE = re.compile(r"`(labelq [^`]+)`")


def bash_commands(text: str) -> list[tuple[int, str]]:
    """The `labelq ...` commands of the ```bash blocks, with their line numbers;
    backslash continuations joined, shell comments kept (shlex drops them)."""
    out: list[tuple[int, str]] = []
    in_bash = False
    pending = ""
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            in_bash = not in_bash and fence.group(1) in ("bash", "sh", "shell")
            pending = ""
            continue
        if not in_bash:
            continue
        if not pending:
            start = number
        stripped = line.strip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        command = (pending + stripped).strip()
        pending = ""
        # `labelq project list / labelq project show reviews` (README): two commands
        for part in re.split(r"\s+/\s+(?=labelq )", command):
            if part.startswith("labelq "):
                out.append((start, part))
    return out


def inline_commands(text: str) -> list[tuple[int, str]]:
    """The `labelq ...` code spans of the prose (outside code blocks)."""
    out: list[tuple[int, str]] = []
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_block = not in_block
            continue
        if not in_block:
            out.extend((number, m.group(1)) for m in INLINE.finditer(line))
    return out


class Unknown(Exception):
    """A command or option the CLI does not have; `path` says where."""

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def check_command(line: str) -> None:
    """Walks `line` (``labelq ...``) through the CLI; raises Unknown on a name it lacks."""
    words = shlex.split(line, comments=True)
    assert words and words[0] == "labelq", line
    command: click.Command = cli
    path: tuple[str, ...] = ()
    ctx = click.Context(cli, info_name="labelq")
    for word in words[1:]:
        if word.startswith("-") and word != "-":
            option = word.split("=", 1)[0]
            if option not in _options(command):
                raise Unknown((*path, option),
                              f"`labelq {' '.join(path)}` has no option {option}")
            continue
        if isinstance(command, click.Group):
            sub = command.get_command(ctx, word)
            if sub is None:
                raise Unknown((*path, word), f"`labelq {' '.join(path)}` has no command {word!r}")
            command, path = sub, (*path, word)
        # else: an argument or an option's value


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_and_option_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    commands = bash_commands(text) + (inline_commands(text) if doc == DOCS[0] else [])
    failures = []
    for number, line in commands:
        try:
            check_command(line)
        except Unknown as exc:
            failures.append(f"{doc.name}, line {number}: {exc} ({line})")
    assert not failures, "\n".join(failures)


def test_the_guide_is_walked() -> None:
    """The extraction finds the guide's commands (an empty list would pass anything)."""
    commands = [c for _, c in bash_commands(DOCS[0].read_text(encoding="utf-8"))]
    assert len(commands) >= 30
    for expected in ("labelq init --here", "labelq tasks load reviews tasks.jsonl",
                     "labelq run-worker", "labelq export reviews --out answers.csv"):
        assert expected in commands
    # a continued line is one command with all its options
    create = next(c for c in commands if c.startswith("labelq project create reviews "))
    assert "--quality rule=sequential,threshold=0.6,min_gold=5" in create


@pytest.mark.parametrize("line", [
    "labelq export reviews --fromat parquet --out a.parquet",   # misspelt option
    "labelq tasks lod reviews tasks.jsonl",                      # misspelt subcommand
    "labelq gold mark reviews --files audit.csv",               # renamed option
    "labelq exprt reviews",                                      # unknown command
])
def test_a_wrong_name_fails(line: str) -> None:
    with pytest.raises(Unknown):
        check_command(line)


def test_right_names_pass() -> None:
    for line in ("labelq export reviews --format=parquet --out a.parquet -o csv",
                 "labelq gold mark reviews --file audit.csv  # a comment --not-an-option",
                 "labelq workers enroll reviews alice --cost 0.05 --capacity 300 --json"):
        check_command(line)
