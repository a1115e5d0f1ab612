"""``labelq tasks load|show|list`` and ``labelq gold load|correct|mark|suggest|audit``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import click

from labelq.errors import LabelqError

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    REDIS_OPTION,
    LazyChoice,
    Output,
    emit,
    emit_record,
    engine,
    redis_client,
    stored_id,
)

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar  # (what click.progressbar returns)
    from redis import Redis
    from sqlmodel import Session

    from labelq.record.models import Project

# a task file's format (None: from its extension)
FileFormat = Literal["csv", "jsonl"]

FORMAT_OPTION = click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]),
                             default=None, help="File format (default: from the extension).")


def _mark_kinds() -> list[str]:
    from labelq.record.models import MARK_KINDS
    return list(MARK_KINDS)


class _Progress:
    """A progress bar on stderr, opened on the first report (when the total is known)."""

    def __init__(self, label: str) -> None:
        self.label, self.done = label, 0
        self.bar: ProgressBar[int] | None = None

    def __call__(self, written: int, total: int) -> None:
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label,
                                         file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(written - self.done)
        self.done = written

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _load(name: str, file: str, fmt: FileFormat | None, database_url: str | None, gold: bool,
          output: Output = "table") -> None:
    from labelq.record.db import session_scope
    from labelq.record.loading import load_tasks
    from labelq.record.projects import get_project
    what = "gold questions" if gold else "tasks"
    click.echo(f"validating {file} ...", err=True)
    progress = _Progress(f"writing {what}")
    try:
        with session_scope(engine(database_url)) as s:
            project = get_project(s, name)
            unscheduled = gold and not project.gold_schedule
            result = load_tasks(s, project, file, gold=gold, fmt=fmt, progress=progress)
    finally:
        progress.close()
    if unscheduled and result.inserted:
        # issue 41: gold loaded into a project without a gold schedule is never served
        click.secho(f"warning: project {name!r} has no gold schedule: these gold questions "
                    f"will never be served; set one: labelq project update {name} "
                    "--gold-schedule fixed:rate=0.1 (docs/gold.md)", fg="yellow", err=True)
    if output != "table":
        emit_record({"project": name, "file": str(file), "gold": gold,
                     "inserted": result.inserted,
                     "skipped_existing": result.skipped_existing}, output)
        return
    skipped = (f"; {result.skipped_existing} already present, skipped"
               if result.skipped_existing else "")
    one = "gold question" if gold else "task"
    click.echo(f"loaded {result.inserted} {one if result.inserted == 1 else what} into "
               f"{name!r}{skipped}")


@click.group()
def tasks() -> None:
    """Load tasks to be labeled."""


@tasks.command("load")
@click.argument("name")
@click.argument("file", type=click.Path())  # unreadable: InputError, exit 3
@FORMAT_OPTION
@DB_OPTION
@OUTPUT_OPTION
def tasks_load(name: str, file: str, fmt: FileFormat | None, database_url: str | None,
               output: Output) -> None:
    """Load tasks from FILE (CSV or JSONL with `id`, optional `category`, any payload
    fields) into project NAME. All or nothing; ids already present are skipped."""
    _load(name, file, fmt, database_url, gold=False, output=output)


@tasks.command("show")
@click.argument("name")
@click.argument("task_id")
@DB_OPTION
@OUTPUT_OPTION
def tasks_show(name: str, task_id: str, database_url: str | None, output: Output) -> None:
    """Show task TASK_ID of project NAME (gold questions too): category, payload, gold
    answer, its kind and source (the file, cli, review NAME, correct cli), and every label
    with its worker, time and assignment."""
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project
    from labelq.reporting import task_detail

    with session_scope(engine(database_url)) as s:
        detail = task_detail(s, get_project(s, name), task_id)
    if output == "json":
        import json
        click.echo(json.dumps(detail, indent=2))
        return
    labels = detail.pop("labels")
    if output == "table":
        emit_record({**detail, "labels": len(labels)}, output)
        if labels:
            click.echo("")
    emit(labels, output, columns=["worker", "label", "received", "assignment"])


@tasks.command("list")
@click.argument("name")
@click.option("--state", type=click.Choice(["pending", "labelled", "gold", "unlabeled",
                                            "in_progress", "complete"]),
              default=None, help="Only these tasks: pending (still asked for: unlabeled or "
                                 "in progress), labelled (at least one label), gold, or a "
                                 "state as labelq status counts it.")
@click.option("--category", default=None, help="Only tasks of this category.")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="At most this many tasks (in load order).")
@DB_OPTION
@OUTPUT_OPTION
def tasks_list(name: str, state: str | None, category: str | None, limit: int | None,
               database_url: str | None, output: Output) -> None:
    """List the tasks of project NAME (gold questions too), in load order: id, category,
    state, labels, the gold answer, kind and source (the file, cli, review NAME, correct
    cli) of a gold question, payload. Rows are printed as they are read (a project of any
    size lists in constant memory); -o json prints a JSON array, -o csv a header then
    rows; the table's payload is cut at 60 characters, a source to its last 24."""
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project
    from labelq.record.tasklist import TASK_COLUMNS, iter_tasks

    with session_scope(engine(database_url)) as s:
        rows = iter_tasks(s, get_project(s, name), state=state, category=category,
                          limit=limit)
        _stream(rows, output, TASK_COLUMNS)


def _stream(rows: Iterator[dict[str, Any]], fmt: Output, columns: list[str]) -> None:
    """Print rows as they come, in the formats of :func:`emit` (a JSON array, CSV with a
    header, a table: its columns as wide as the first 1000 rows need)."""
    import csv
    import io
    import json

    from ._common import _cell, _csv_cell

    if fmt == "json":
        first = True
        for row in rows:
            text = json.dumps(row, indent=2, default=str)
            click.echo(("[\n" if first else ",\n") + "  " + text.replace("\n", "\n  "),
                       nl=False)
            first = False
        click.echo("[]" if first else "\n]")
        return
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_cell(v) for k, v in row.items()})
            if buf.tell() > 65536:
                click.echo(buf.getvalue(), nl=False)
                buf.seek(0)
                buf.truncate()
        click.echo(buf.getvalue(), nl=False)
        return

    def cells(row: dict[str, Any]) -> list[str]:
        out = [_cell(row.get(c)) for c in columns]
        if "payload" in columns:
            i = columns.index("payload")
            out[i] = out[i] if len(out[i]) <= 60 else out[i][:59] + "…"
        if "gold_source" in columns:  # a file's path: its end (the name) says most
            i = columns.index("gold_source")
            out[i] = out[i] if len(out[i]) <= 24 else "…" + out[i][-23:]
        return out

    head: list[list[str]] = []
    widths: list[int] | None = None
    for row in rows:
        if widths is None:
            head.append(cells(row))
            if len(head) < 1000:
                continue
            widths = _widths(columns, head)
            for line in head:
                _line(line, widths)
            continue
        _line(cells(row), widths)
    if widths is None:
        if not head:
            click.echo("(none)")
            return
        widths = _widths(columns, head)
        for line in head:
            _line(line, widths)


def _widths(columns: list[str], head: list[list[str]]) -> list[int]:
    widths = [max(len(c), *(len(row[i]) for row in head)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    return widths


def _line(cells: list[str], widths: list[int]) -> None:
    click.echo("  ".join(v.ljust(w) for v, w in zip(cells, widths, strict=True)).rstrip())


@click.group()
def gold() -> None:
    """Gold questions (tasks whose answer is known): load them, draw an audit or suggest
    tasks for an expert, mark loaded tasks as gold, correct an answer."""


@gold.command("load")
@click.argument("name")
@click.argument("file", type=click.Path())  # unreadable: InputError, exit 3
@FORMAT_OPTION
@DB_OPTION
@OUTPUT_OPTION
def gold_load(name: str, file: str, fmt: FileFormat | None, database_url: str | None,
              output: Output) -> None:
    """Load gold questions from FILE (as for tasks, plus `answer`, which must be in the
    project's label set) into project NAME."""
    _load(name, file, fmt, database_url, gold=True, output=output)


@gold.command("correct")
@click.argument("name")
@click.argument("task_id")
@click.argument("answer")
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def gold_correct(name: str, task_id: str, answer: str, database_url: str | None,
                 redis_url: str | None, output: Output) -> None:
    """Set the answer of gold question TASK_ID in project NAME to ANSWER, when the one
    loaded was wrong: the annotators' gold scores and exports follow at once, running
    policies fold their state again, and paused annotators the corrected scores no longer
    flag are named (resume them with labelq workers resume)."""
    from sqlmodel import select

    from labelq.record.db import session_scope
    from labelq.record.goldstats import flagged
    from labelq.record.models import Worker
    from labelq.record.problem import load_view
    from labelq.record.projects import correct_gold, get_project

    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        out = correct_gold(s, project, task_id, answer, source="cli")
        pid = stored_id(project)
        paused = dict(s.exec(select(Worker.seq, Worker.handle).where(
            Worker.project_id == pid, Worker.status == "paused")).all())
        cleared: list[str] = []
        if project.quality and paused:
            still = set(flagged(s, project, list(paused), load_view(s, project).categories))
            cleared = [h for seq, h in paused.items() if seq not in still]
    n = out["labels"]
    if output == "table":
        click.echo(f"{task_id}: answer {out['old_answer']} -> {out['answer']} "
                   f"({n} gold answer{'' if n == 1 else 's'} re-scored)")
    try:
        from labelq.live.home import claim_home
        from labelq.live.hotstate import bump_epoch
        from labelq.live.redis.keys import Keys
        r = redis_client(redis_url)
        bump_epoch(r, Keys(pid, claim_home(s.get_bind().engine, r)))
    except LabelqError as exc:
        click.echo(f"warning: {exc}; running policies keep the old answer until "
                   f"'labelq rebuild {name}'", err=True)
    if output != "table":
        emit_record({**out, "no_longer_flagged": cleared}, output)
    elif cleared:
        click.echo(f"paused annotators the rule no longer flags: {', '.join(cleared)} "
                   f"(labelq workers resume HANDLE)")


@gold.command("mark")
@click.argument("name")
@click.argument("task_id", required=False)
@click.argument("answer", required=False)
@click.option("--file", "file", type=click.Path(), default=None,
              help="CSV or JSONL with `id` and `answer` (other columns ignored): every row "
                   "is checked first; a bad one marks nothing.")
@click.option("--kind", type=LazyChoice(_mark_kinds), default=None,
              help="What the answers are: audit (a random sample: they score annotators), "
                   "suggested or reviewed (chosen: they never score anyone). Default, per "
                   "task: audit if labelq gold audit drew it, suggested if labelq gold "
                   "suggest listed it, else reviewed.")
@FORMAT_OPTION
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def gold_mark(name: str, task_id: str | None, answer: str | None, file: str | None,
              kind: str | None, fmt: FileFormat | None, database_url: str | None,
              redis_url: str | None, output: Output) -> None:
    """Make tasks of project NAME gold questions with known answers (an expert's review):
    TASK_ID ANSWER, or every row of --file. Answers to tasks an audit drew at random
    (kind audit) score the annotators who labelled them (the quality rule judges them at
    once); answers to chosen tasks (suggested, reviewed: see --kind) choose the
    aggregation and correct those tasks, and never score or pause anyone. The tasks are
    served as gold from now on, and they stay data: the export gives each its known
    answer with confidence 1. A task assigned to an annotator right now is queued, and
    marked when its assignment ends (label submitted, declined or expired); the others
    are marked at once. A bad row changes nothing. A task already gold with the same
    answer is skipped; another answer is for labelq gold correct."""
    from labelq.live.goldmark import mark_gold_live
    from labelq.record.db import session_scope
    from labelq.record.projects import GoldMark, get_project, read_gold_marks

    if file is not None and task_id is None and answer is None:
        eng = engine(database_url)
        click.echo(f"validating {file} ...", err=True)
        with session_scope(eng) as s:
            marks = read_gold_marks(file, get_project(s, name), fmt)
    elif file is None and task_id is not None and answer is not None:
        eng = engine(database_url)
        marks = [GoldMark(task_id, answer)]
    else:
        raise click.UsageError("give TASK_ID ANSWER, or --file FILE (not both)")
    redis: Redis | None
    try:
        redis = redis_client(redis_url)
    except LabelqError as exc:
        redis = None
        click.echo(f"warning: {exc}; marking in the database only: run 'labelq rebuild "
                   f"{name}' before annotators go on, or the queue may still hand these "
                   "tasks out as ordinary ones", err=True)
    if redis is not None:  # (a copy of the database is refused: labelq.live.home)
        from labelq.live.home import claim_home
        claim_home(eng, redis)
    # the answers' gold_source: the file as given, or ``cli`` for TASK_ID ANSWER
    out = mark_gold_live(eng, redis, name, marks, source=file or "cli", kind=kind)
    if output != "table":
        emit_record(out, output)
        return
    n, k = out["marked"], out["labels"]
    skipped = f"; {out['skipped']} already gold with that answer, skipped" \
        if out["skipped"] else ""
    kinds = ", ".join(f"{c} {kd}" for kd, c in sorted(out["kinds"].items()))
    click.echo(f"marked {n} task{'' if n == 1 else 's'} of {name!r} as gold questions "
               f"({k} label{'' if k == 1 else 's'} on them now gold answers){skipped}"
               + (f"; kinds: {kinds}" if kinds else ""))
    chosen = sum(c for kd, c in out["kinds"].items() if kd != "audit")
    if chosen:
        click.echo(f"{chosen} of them chosen (not a random sample): they correct those "
                   "tasks and choose the aggregation, and score no annotator", err=True)
    if out["paused"]:
        click.echo(f"paused by the quality rule on these gold answers: "
                   f"{', '.join(out['paused'])}")
    for r in out["replaced"]:
        came = f" from {r['queued_source']}" if r["queued_source"] else ""
        click.echo(f"{r['task']}: the answer queued earlier{came}, {r['queued_answer']!r}, "
                   f"replaced by {r['answer']!r} (its assignment had ended, the queued mark "
                   "not applied yet)")
    if out["queued"]:
        q = out["queued"]
        click.echo(f"{n} marked, {len(q)} queued until "
                   + ("its assignment ends" if len(q) == 1 else "their assignments end")
                   + f": {', '.join(q)} (marked then by the applier or the reaper)")


@gold.command("suggest")
@click.argument("name")
@click.option("--n", "n", type=click.IntRange(min=1), default=30, show_default=True,
              help="How many tasks to suggest (at most).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Breaks ties between equally good tasks.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the suggestions to FILE (CSV; JSON with -o json), written "
                   "atomically, instead of printing them.")
@DB_OPTION
@OUTPUT_OPTION
def gold_suggest(name: str, n: int, seed: int, out: str | None, database_url: str | None,
                 output: Output) -> None:
    """The loaded tasks of project NAME (labelled, not gold yet) whose expert answer would
    teach the most: where the candidate aggregations (mv, wmv, onecoin, ds, ds-category)
    disagree and where the workers who label the most split, spread over the workers
    (docs/gold.md, "Suggesting gold"). Each row (CSV) has an empty `answer` for the expert,
    the category, the task's payload fields (as labelq gold audit writes them), the
    candidates' answers, the labels given, a score and the reason; JSON has the payload as
    an object and also the project's current answer (`current`: the CSV leaves it out, so
    that nobody copies it as the expert's). Fill in `answer` (delete the rows left
    unanswered), then: labelq gold mark NAME --file FILE; or answer them on the review page
    (/review)."""
    from labelq.dashboard import SUGGESTION_COLUMNS, project_gold_suggestions, suggestion_csv_row
    from labelq.exporting import atomic_output, write_rows
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        rows = project_gold_suggestions(s, project, n=n, seed=seed)
        payloads = _record_suggested(s, project, [r["id"] for r in rows], seed)
    rows = [{**r, "payload": payloads.get(r["id"], {})} for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r["payload"]))
    # the expert's file: no `current` (nor its confidence and method), the payload's fields
    lead = ["id", "answer", "category"]
    columns = lead + [f"payload.{k}" if k in SUGGESTION_COLUMNS else k for k in keys] + [
        c for c in SUGGESTION_COLUMNS
        if c not in lead and c not in ("current", "confidence", "current_method")]

    def csv_row(r: dict[str, Any]) -> dict[str, Any]:
        cells = suggestion_csv_row({k: v for k, v in r.items() if k in columns})
        for k in keys:
            cells[f"payload.{k}" if k in SUGGESTION_COLUMNS else k] = _cell(r["payload"].get(k))
        return cells

    if out is not None:
        import json
        with atomic_output(out) as fh:
            if output == "json":
                fh.write(json.dumps(rows, indent=2) + "\n")
            else:
                write_rows((csv_row(r) for r in rows), fh, "csv", columns=columns)
        click.echo(f"wrote {len(rows)} suggestion{'' if len(rows) == 1 else 's'} to {out}; "
                   f"fill in `answer`, then: labelq gold mark {name} --file {out}", err=True)
        return
    if not rows:
        click.echo(f"no task of {name!r} to suggest (none labelled that is not gold)",
                   err=True)
    if output == "json":
        import json
        click.echo(json.dumps(rows, indent=2))
    elif output == "csv":
        emit([csv_row(r) for r in rows], output, columns=columns)
    elif rows:
        emit([suggestion_csv_row({k: v for k, v in r.items() if k in columns})
              for r in rows], output,
             columns=[c for c in columns if c in SUGGESTION_COLUMNS and c != "answer"])


def _record_suggested(session: Session, project: Project, ids: list[str], seed: int
                      ) -> dict[str, dict[str, Any]]:
    """Remember that ``ids`` were suggested, in their order (best first): marked later, they
    are of kind suggested, and the review page offers them in that order. Returns each
    one's payload."""
    from sqlmodel import col, select

    from labelq.record.golddraw import record_draw
    from labelq.record.models import Task, utcnow

    found = {t.external_id: t for t in session.exec(select(Task).where(
        col(Task.project_id) == project.id, col(Task.external_id).in_(ids)))} if ids else {}
    record_draw(session, project, [int(found[e].id or 0) for e in ids if e in found],
                "suggested",
                f"suggest {utcnow().strftime('%Y-%m-%dT%H:%M:%S.%fZ')} seed {seed}")
    return {e: dict(t.payload) for e, t in found.items()}


@gold.command("audit")
@click.argument("name")
@click.option("--n", "n", type=click.IntRange(min=1), default=50, show_default=True,
              help="How many tasks to draw (all the eligible ones if fewer).")
@click.option("--seed", type=int, default=None,
              help="Seed of the draw (default: fresh randomness).")
@click.option("--out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the drawn tasks to FILE (CSV; JSON with -o json), written "
                   "atomically, instead of printing them.")
@DB_OPTION
@OUTPUT_OPTION
def gold_audit(name: str, n: int, seed: int | None, out: str | None, database_url: str | None,
               output: Output) -> None:
    """Draw N labelled tasks of project NAME uniformly at random for an expert to answer:
    an audit. Only labelled tasks that are not gold and that no earlier audit drew; the draw
    is stratified by category with proportional allocation (randomised rounding), so every
    such task has the same chance of being drawn. The draw is recorded in the database:
    the expert's answers, marked with labelq gold mark NAME --file FILE, are of kind audit,
    a random sample, which scores the annotators (unlike suggested tasks). Each row: id,
    an empty `answer`, category, and the task's payload fields. Answer every row: leaving
    out the hard ones would make the sample a chosen one again."""
    import json

    import numpy as np

    from labelq.exporting import atomic_output, write_rows
    from labelq.record.db import session_scope
    from labelq.record.golddraw import AUDIT_STRATIFICATION, audit_draw
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        got = audit_draw(s, project, n, np.random.default_rng(seed))
        rows: list[dict[str, Any]] = [{"id": t.external_id, "answer": "",
                                       "category": t.category, "payload": t.payload}
                                      for t in got.tasks]
        keys = list(dict.fromkeys(k for t in got.tasks for k in t.payload))
        flat = [{"id": t.external_id, "answer": "", "category": t.category,
                 **{k: _cell(t.payload.get(k)) for k in keys}} for t in got.tasks]
        columns = ["id", "answer", "category", *keys]
        note = (f"no task of {name!r} to audit (none labelled that is neither gold nor "
                "drawn by an earlier audit)") if not got.eligible else (
                f"drew {len(rows)} of the {got.eligible} labelled tasks of {name!r} that are "
                "neither gold nor drawn before "
                f"({AUDIT_STRATIFICATION}; each with chance {got.inclusion:.4g}); by category: "
                + ", ".join(f"{c or '-'} {d} of {e}" for c, (e, d) in got.by_category.items()))
        # (inside the transaction: a file that cannot be written records no draw)
        if out is not None:
            with atomic_output(out) as fh:
                if output == "json":
                    fh.write(json.dumps(rows, indent=2) + "\n")
                else:
                    write_rows(flat, fh, "csv", columns=columns)
    click.echo(note, err=True)
    if out is not None:
        click.echo(f"wrote {len(rows)} task{'' if len(rows) == 1 else 's'} to {out}; fill in "
                   f"`answer` for every row, then: labelq gold mark {name} --file {out}",
                   err=True)
        return
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        emit(flat, output, columns=columns)


def _cell(v: object) -> str:
    """A payload value as a CSV cell: text as it is, anything else as JSON."""
    import json

    return "" if v is None else v if isinstance(v, str) else json.dumps(v)


commands = [tasks, gold]
