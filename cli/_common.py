"""Helpers shared by the command modules: settings, database, output formats."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol

import click

from labelq.errors import LabelqError, ServiceUnavailable
from labelq.record.location import Location, locate, open_database, sqlite_path
from labelq.record.settings import load_settings

if TYPE_CHECKING:
    import redis
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from labelq.record.models import Project
    from labelq.record.settings import Settings

# a command function: Click calls it with its parameters by name; it prints, returns nothing
Command = Callable[..., None]
# what -o/--output names (OUTPUT_OPTION's formats; a command may offer fewer)
Output = Literal["table", "json", "csv"]

# the database the running command opened (``labelq`` names it in a "not found" error)
OPENED: list[Location] = []

class LazyChoice(click.Choice[str]):
    """A choice whose values come from a module imported only when they are needed (an
    option given, the command's own ``--help``): ``labelq --help`` and the commands that
    do not aggregate must not import the aggregation methods to list their names."""

    def __init__(self, load: Callable[[], Iterable[str]], case_sensitive: bool = True) -> None:
        self._load = load
        self._choices: tuple[str, ...] | None = None
        super().__init__((), case_sensitive=case_sensitive)

    @property
    def choices(self) -> tuple[str, ...]:
        if self._choices is None:
            self._choices = tuple(self._load())
        return self._choices

    @choices.setter
    def choices(self, value: Iterable[str]) -> None:
        self._choices = tuple(value) or None


class OutputFormat(click.Choice[str]):
    """``-o/--output`` names a format, in every command; a value that is not one (``-o
    answers.csv``: the file it once meant in ``labelq aggregate``) gets an error saying
    where files go (``--out FILE``)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r} is not an output format ({', '.join(self.choices)}): "
                      "-o/--output names the format printed on stdout; write a file with "
                      "--out FILE", param, ctx)


def output_option(*formats: str, default: str | None = None, envvar: str | None = None,
                  json_flag: bool = True) -> Callable[[Command], Command]:
    """``-o/--output FORMAT`` (what is printed on stdout) and ``--json``, which means
    ``-o json`` in every command that prints data. The command gets ``output``."""
    formats = formats or ("table", "json", "csv")
    default = default or formats[0]

    def decorate(f: Command) -> Command:
        @functools.wraps(f)
        def wrapper(*args: object, as_json: bool = False, **kwargs: object) -> None:
            if as_json:
                kwargs["output"] = "json"
            f(*args, **kwargs)
        if json_flag:
            wrapper = click.option("--json", "as_json", is_flag=True,
                                   help="Print JSON (the same as -o json).")(wrapper)
        return click.option("--output", "-o", type=OutputFormat(list(formats)),
                            default=default, show_default=True, envvar=envvar,
                            help="Format of what is printed on stdout"
                                 + (f" [env: {envvar}]." if envvar else "."))(wrapper)
    return decorate


OUTPUT_OPTION = output_option("table", "json", "csv", envvar="LABELQ_OUTPUT")
DB_OPTION = click.option(
    "--database-url", default=None,
    help="SQLAlchemy URL of the durable record; else LABELQ_DATABASE_URL, else the nearest "
         "labelq.toml's database_url (this folder or above), else the per-user "
         "$XDG_DATA_HOME/labelq/labelq.db.")


REDIS_OPTION = click.option("--redis-url", envvar="LABELQ_REDIS_URL", default=None,
                            help="Redis URL of the hot state and broker [env: LABELQ_REDIS_URL].")


def use_locations(database_url: str | None, redis_url: str | None) -> Settings:
    """``--database-url`` and ``--redis-url`` of a command that starts long-running
    processes (``serve``, ``run-worker``): the same as LABELQ_DATABASE_URL and
    LABELQ_REDIS_URL (the option wins), so they are set in this process's environment,
    which the processes it starts (API processes, Celery's) read their settings from.
    Returns the settings, validated (a bad URL: exit code 2, naming the variable)."""
    if database_url:
        os.environ["LABELQ_DATABASE_URL"] = database_url
    if redis_url:
        os.environ["LABELQ_REDIS_URL"] = redis_url
    return load_settings()


def redis_client(url: str | None = None) -> redis.Redis:
    import redis

    url = url or load_settings().redis_url
    from labelq.live.redis.connect import connect

    client = connect(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"Redis at {url} does not answer: {exc}") from exc
    return client


def hot_redis(eng: Engine, url: str | None = None) -> redis.Redis:
    """:func:`redis_client`, for a command that touches ``eng``'s hot state: once its
    database is the home of its identity there (``labelq.live.home``; a copy of a database
    is refused, exit code 9, before any key is read or written)."""
    from labelq.live.home import claim_home
    client = redis_client(url)
    claim_home(eng, client)
    return client


def _located(database_url: str | None) -> tuple[Location, str]:
    """Where the database is (``labelq.record.location``), and its SQLAlchemy URL; the other
    variables are read (and validated) too, with the URL given replacing its own."""
    location = locate(database_url)
    settings = load_settings({**os.environ, "LABELQ_DATABASE_URL": location.url})
    return location, settings.sqlalchemy_url


def engine(database_url: str | None = None) -> Engine:
    """The engine of the configured database, which must exist with its schema (``labelq
    init`` makes it; no other command creates a database, a file or a table): else exit
    code 9, saying where it looked."""
    location, url = _located(database_url)
    eng = open_database(location, url)
    OPENED[:] = [location]
    return eng


@contextmanager
def project_session(eng: Engine, name: str) -> Iterator[tuple[Session, Project]]:
    """A session on ``eng`` (one transaction: :func:`labelq.record.db.session_scope`) and
    project NAME read in it; no such project: exit 4, naming the database."""
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project

    with session_scope(eng) as s:
        yield s, get_project(s, name)


def init_engine(database_url: str | None = None) -> tuple[Engine, Location, str]:
    """``labelq init``: the configured database, created with its schema where missing
    (a SQLite file's folder too); on a database of an earlier labelq, the schema upgrade.
    Returns (engine, location, database identity)."""
    from pathlib import Path

    from labelq.record.db import engine_for, init_schema
    from labelq.record.location import check_sqlite_file, refuse_memory
    location, url = _located(database_url)
    refuse_memory(location)
    check_sqlite_file(location, creating=True)
    file = sqlite_path(location.url)
    if file is not None:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
    eng = engine_for(url)
    uid = init_schema(eng)
    OPENED[:] = [location]
    return eng, location, uid


@contextmanager
def hook_events_at_once() -> Iterator[None]:
    """Within it, the webhook events this command commits (an annotator paused or resumed,
    an export written) are sent for delivery as soon as they commit, as ``labelq serve``
    and the workers do (:func:`labelq.hooks.deliver_at_once`), not at the worker's next
    beat, which stays the safety net (a send that fails is left to it). Celery is imported
    only when there is an event to send (a project without hooks writes none); after it,
    nothing more is sent at once (the listeners are the process's: a command run in a
    test's process must not leave them on)."""
    from labelq.hooks import deliver_at_once

    def send(name: str, args: list[Any]) -> None:
        from workers.hooks import send_delivery  # (the hooks' queue of the event's database)
        send_delivery(name, args)
    deliver_at_once(send)
    try:
        yield
    finally:
        deliver_at_once(None)


def emit(rows: Sequence[Mapping[str, object]], fmt: Output,
         columns: Sequence[str] | None = None) -> None:
    """Print rows as an aligned table, a JSON array or CSV."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if fmt == "json":
        click.echo(json.dumps(list(rows), indent=2, default=str))
        return
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in rows)
        click.echo(buf.getvalue(), nl=False)
        return
    if not rows:
        click.echo("(none)")
        return
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def emit_record(record: Mapping[str, object], fmt: Output) -> None:
    """Print one record: ``key  value`` lines, one JSON object (not a list of one: one
    record is an object, a collection is a list, in every command as in the API), or CSV
    with its header."""
    if fmt == "table":
        width = max(len(k) for k in record)
        for k, v in record.items():
            # a value of several lines (a project's instructions, an export's report) keeps
            # to its column, so the next key still starts a line of its own
            click.echo(f"{k.ljust(width)}  "
                       + _cell(v).replace("\n", "\n" + " " * (width + 2)))
    elif fmt == "json":
        click.echo(json.dumps(record, indent=2, default=str))
    else:
        emit([record], fmt)


def emit_next(assignment: Mapping[str, object] | None, idle: str | None, fmt: Output) -> None:
    """A next assignment (``None``: there is none now, ``idle`` says why, on stderr). With
    JSON, the API's answer to ``POST /assignments/next``: ``{"assignment": ... or null,
    "message": ... or null}``."""
    if fmt == "json":
        if assignment is None:
            click.echo(idle, err=True)
        emit_record({"assignment": assignment,
                     "message": None if assignment is not None else idle}, fmt)
    elif assignment is None:
        emit_nothing(idle or "no task for you now", fmt)
    else:
        emit_record(assignment, fmt)


def emit_submission(out: Mapping[str, object], assignment: Mapping[str, object] | None,
                    then_next: bool,
                    idle: str | None, fmt: Output) -> None:
    """A submission's answer and, with ``--next``, the next ``assignment`` (``None``:
    ``idle`` says why on stderr). With JSON, one document, the API's answer to ``POST
    /assignments/{id}/label``: the submission with its ``next`` (``null`` without
    ``--next``, else as :func:`emit_next`: ``{"assignment": ..., "message": ...}``);
    otherwise the submission's record, then the assignment's."""
    if then_next and assignment is None:
        click.echo(idle, err=True)
    if fmt == "json":
        nxt = None if not then_next else {
            "assignment": assignment, "message": None if assignment is not None else idle}
        emit_record({**out, "next": nxt}, fmt)
        return
    emit_record(out, fmt)
    if assignment is not None:
        emit_record(assignment, fmt)


def emit_nothing(message: str, fmt: Output) -> None:
    """No record to print (no assignment for the worker now): say why on stderr, and give
    a JSON reader an empty list rather than nothing."""
    click.echo(message, err=True)
    if fmt == "json":
        click.echo("[]")


def _csv_cell(value: Any) -> Any:
    """A CSV field: lists comma-joined (the field is quoted), mappings as JSON, None empty;
    never a Python repr."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


def _cell(value: Any) -> str:
    """A table cell: "-" for none (None, "", an empty list or mapping), never "None"."""
    if value is None or (isinstance(value, (str, list, tuple, dict)) and not value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class _Stored(Protocol):
    id: int | None


def stored_id(row: _Stored) -> int:
    """The id of a row read from the database (a model's ``id`` is typed ``int | None``:
    ``None`` only before a new row is flushed)."""
    if row.id is None:
        raise LabelqError(f"{type(row).__name__} has no id yet (not stored)")
    return row.id


def spec_text(policy: dict[str, Any]) -> str:
    """A project's stored policy as it is written on the command line (``name:k=v``)."""
    from labelq.policies import PolicySpec
    return str(PolicySpec.from_json(policy))
