"""Live pipeline commands: ``run-worker`` (also ``worker``), ``rebuild``, ``next``,
``submit``, ``decline``."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from ._common import (
    DB_OPTION,
    OUTPUT_OPTION,
    REDIS_OPTION,
    Command,
    Output,
    emit_next,
    emit_record,
    emit_submission,
    engine,
    redis_client,
    stored_id,
    use_locations,
)

if TYPE_CHECKING:
    from labelq.service import Service

TOKEN_OPTION = click.option(
    "--token", envvar="LABELQ_TOKEN", required=True,
    help="The annotator's token (printed at enrollment) [env: LABELQ_TOKEN].")


PROJECT_OPTION = click.option(
    "--project", "project_name", default=None,
    help="The project to work in, for an annotator enrolled in several (else their only "
         "one, or their default).")


def check_token(handle: str, token: str, database_url: str | None = None,
                project_name: str | None = None) -> tuple[list[str], int]:
    """The token must be HANDLE's own: an annotator acts only as themselves. Returns the
    label set of the project they work in (``project_name``, else their only or default
    one) and its id."""
    from labelq.errors import Forbidden, NotFound
    from labelq.record.db import session_scope
    from labelq.record.models import Project
    from labelq.record.projects import worker_by_token

    with session_scope(engine(database_url)) as s:
        worker = worker_by_token(s, token, project_name)
        if worker is None or worker.handle != handle:
            raise Forbidden(f"the token given does not belong to worker {handle!r}", worker=handle)
        if worker.status == "removed":  # as the API answers
            raise Forbidden(f"worker {handle!r} has been removed from the project",
                            worker=handle)
        project = s.get(Project, worker.project_id)
        if project is None:  # (a worker's project is kept while the worker is)
            raise NotFound(f"worker {handle!r} has no project", worker=handle)
        return list(project.labels), worker.project_id


def service(database_url: str | None = None, redis_url: str | None = None) -> Service:
    from labelq.record.db import database_id
    from labelq.record.settings import load_settings
    from labelq.service import Service
    from workers.tasks import notify_for

    env = dict(os.environ)
    if database_url:
        env["LABELQ_DATABASE_URL"] = database_url
    if redis_url:
        env["LABELQ_REDIS_URL"] = redis_url
    eng = engine(database_url)
    return Service(eng, redis_client(redis_url), settings=load_settings(env),
                   notify=notify_for(database_id(eng)))


def _worker_options(f: Command) -> Command:
    f = REDIS_OPTION(f)
    f = DB_OPTION(f)
    f = click.option("--loglevel", default="info", show_default=True)(f)
    f = click.option("--long-work/--no-long-work", "long_work", default=True,
                     show_default=True,
                     help="Also run one Celery process for the long work queue (exports: "
                          "the database's queue + '.long'), so no label waits behind an "
                          "export; --no-long-work if another worker serves it.")(f)
    f = click.option("--hooks/--no-hooks", "hooks", default=True, show_default=True,
                     help="Also run one Celery process (4 threads) delivering webhooks "
                          "(the database's queue + '.hooks'), so no label or export waits "
                          "on a receiver; --no-hooks if another worker serves it.")(f)
    f = click.option("--beat/--no-beat", default=True, show_default=True,
                     help="Also run the periodic upkeep (lease expiry, new tasks).")(f)
    return click.option("--concurrency", "-c", type=int, default=1, show_default=True,
                        help="Celery worker processes.")(f)


@click.command("run-worker")
@_worker_options
def worker_cmd(concurrency: int, beat: bool, loglevel: str, long_work: bool = True,
               database_url: str | None = None, redis_url: str | None = None,
               hooks: bool = True) -> None:
    """Run the Celery worker applying labels to the posterior, with the periodic upkeep
    (celery -A workers.main worker); `labelq worker` is the same command's earlier name.
    (Annotators are `labelq workers`.) Exports run in one more Celery process, on their
    own queue (--no-long-work: not here), and webhook deliveries in another (--no-hooks).

    It serves one database, on that database's own queue (labelq.<database id>, or
    LABELQ_CELERY_QUEUE when set): several databases on one Redis each need their own
    worker, and never wake each other's.

    This process becomes the Celery worker (exec, same PID), so a supervisor's SIGTERM or a
    Ctrl-C reaches Celery itself, which finishes its current task and stops its pool; a
    wrapper process would die alone and leave the worker running unsupervised. The long
    work process is its child and gets SIGTERM when it exits (Linux: the parent-death
    signal), also when it is killed."""
    from labelq.record.db import database_id
    from labelq.record.location import open_configured

    # the options mean what the variables mean, for this process and the Celery ones
    settings = use_locations(database_url, redis_url)
    # the database must exist (``labelq init``): said here, before Celery starts, with
    # where it was looked for, rather than by every pool process at its first task
    engine = open_configured(settings)
    from ._common import hot_redis  # (a copy of another database: refused here, exit 9)
    hot_redis(engine, settings.redis_url)
    # its queue: the database's own (Celery's processes learn the same when they start)
    database = database_id(engine)
    queue, long_queue = settings.queue_of(database), settings.long_queue_of(database)
    click.echo(f"serving database {database} on queue {queue}", err=True)
    celery = [sys.executable, "-m", "celery", "-A", "workers.main", "worker",
              "--loglevel", loglevel]
    args = [*celery, "-c", str(concurrency), "-Q", queue]
    if beat:
        args.append("--beat")
    sys.stdout.flush()
    sys.stderr.flush()
    if long_work:
        import subprocess
        # one process (one export at a time), no beat, no warmer (it applies no label)
        subprocess.Popen([*celery, "-c", "1", "-Q", long_queue, "-n", "long@%h"],
                         env={**os.environ, "LABELQ_WORKER_LONG": "1"},
                         preexec_fn=_die_with_parent)
    if hooks:
        import subprocess
        # deliveries wait on the network: threads, not processes (labelq/hooks.py)
        subprocess.Popen([*celery, "-P", "threads", "-c", "4", "-Q", settings.hooks_queue_of(database),
                          "-n", "hooks@%h"],
                         env={**os.environ, "LABELQ_WORKER_LONG": "1"},
                         preexec_fn=_die_with_parent)
    os.execv(sys.executable, args)


def _die_with_parent() -> None:
    """In the long work process, before its exec: SIGTERM when its parent (the label
    worker this process execs into) exits, however it ends (Linux ``PR_SET_PDEATHSIG``)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: it outlives a killed parent
        return
    if os.getppid() == 1:  # the parent died before the call
        os._exit(0)


@click.command("worker")
@_worker_options
@click.pass_context
def worker_alias(ctx: click.Context, concurrency: int, beat: bool, loglevel: str,
                 long_work: bool = True, database_url: str | None = None,
                 redis_url: str | None = None, hooks: bool = True) -> None:
    """The same as `labelq run-worker` (its earlier name; annotators are `labelq workers`)."""
    ctx.invoke(worker_cmd, concurrency=concurrency, beat=beat, loglevel=loglevel,
               long_work=long_work, database_url=database_url, redis_url=redis_url,
               hooks=hooks)


@click.command("rebuild")
@click.argument("name")
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def rebuild_cmd(name: str, database_url: str | None, redis_url: str | None,
                output: Output) -> None:
    """Reconstruct all Redis state of project NAME from SQL (after a flush)."""
    from labelq.live.rebuild import rebuild_project
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project

    eng = engine(database_url)
    with session_scope(eng) as session:
        pid = stored_id(get_project(session, name))
    r = redis_client(redis_url)
    emit_record(rebuild_project(eng, r, pid), output)
    from labelq.record.db import database_id
    from workers.tasks import notify_for
    notify_for(database_id(eng))(pid)


@click.command("next")
@click.argument("handle")
@TOKEN_OPTION
@PROJECT_OPTION
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def next_cmd(handle: str, token: str, project_name: str | None, database_url: str | None,
             redis_url: str | None, output: Output) -> None:
    """Issue the next assignment to worker HANDLE."""
    labels, pid = check_token(handle, token, database_url, project_name)
    svc = service(database_url, redis_url)
    issued = svc.next_assignment(handle, pid)
    emit_next(None if issued is None else {**issued.to_dict(), "labels": labels},
              svc.idle_reason(handle, pid) if issued is None else None,
              output)  # none: no error


@click.command("submit")
@click.argument("handle")
@click.argument("assignment")
@click.argument("label")
@TOKEN_OPTION
@PROJECT_OPTION
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
@click.option("--next", "then_next", is_flag=True,
              help="Also issue HANDLE's next assignment (printed after the submission; "
                   "with -o json, as its `next` field, null when there is none; on stderr "
                   "why there is none), as 'labelq annotate submit --next' does.")
def submit_cmd(handle: str, assignment: str, label: str, token: str,
               project_name: str | None, database_url: str | None, redis_url: str | None,
               output: Output, then_next: bool) -> None:
    """Record LABEL for ASSIGNMENT issued to worker HANDLE (durable before it answers)."""
    labels, pid = check_token(handle, token, database_url, project_name)
    svc = service(database_url, redis_url)
    out = svc.submit(handle, assignment, label, then_next=then_next, project_id=pid)
    nxt = out.pop("next", None)
    emit_submission(out, None if nxt is None else {**nxt.to_dict(), "labels": labels},
                    then_next,
                    svc.idle_reason(handle, pid) if then_next and nxt is None else None,
                    output)


@click.command("decline")
@click.argument("handle")
@click.argument("assignment")
@TOKEN_OPTION
@PROJECT_OPTION
@DB_OPTION
@REDIS_OPTION
@OUTPUT_OPTION
def decline_cmd(handle: str, assignment: str, token: str, project_name: str | None,
                database_url: str | None, redis_url: str | None, output: Output) -> None:
    """Give ASSIGNMENT back; the task returns to the pool."""
    _, pid = check_token(handle, token, database_url, project_name)
    emit_record(service(database_url, redis_url).decline(handle, assignment, pid), output)


commands = [worker_cmd, worker_alias, rebuild_cmd, next_cmd, submit_cmd, decline_cmd]
