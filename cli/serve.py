"""``labelq serve``: the HTTP API and the labeling page (uvicorn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

import click

from labelq.record.settings import load_settings

from ._common import DB_OPTION, REDIS_OPTION

if TYPE_CHECKING:
    from fastapi import FastAPI

    from labelq.record.settings import Settings

LogLevel = Literal["critical", "error", "warning", "info", "debug"]


class _ServerOptions(TypedDict):
    """What ``serve`` passes to ``uvicorn.run``, with one process or several."""

    host: str
    port: int
    log_level: LogLevel
    proxy_headers: bool
    server_header: bool
    timeout_graceful_shutdown: int
    timeout_keep_alive: int
    access_log: bool


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, envvar="LABELQ_HOST",
              help="Interface to listen on (0.0.0.0 for every interface) [env: LABELQ_HOST].")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              envvar="LABELQ_PORT", help="TCP port [env: LABELQ_PORT].")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
@click.option("--workers", type=click.IntRange(1, 256), default=1, show_default=True,
              envvar="LABELQ_API_WORKERS",
              help="API processes sharing the port; about one per core, since each spends "
                   "about half a millisecond of CPU per label (docs/benchmarks.md) [env: LABELQ_API_WORKERS].")
@click.option("--keep-alive", type=click.IntRange(1, 3600), default=5, show_default=True,
              envvar="LABELQ_KEEP_ALIVE", metavar="SECONDS",
              help="Close a client's idle connection after this many seconds. Behind a load "
                   "balancer, set it above the balancer's idle timeout (AWS ALB: 60 s): a "
                   "connection closed here as the balancer reuses it is a 502 there "
                   "[env: LABELQ_KEEP_ALIVE].")
@DB_OPTION
@REDIS_OPTION
def serve(host: str, port: int, log_level: LogLevel, workers: int, keep_alive: int = 5,
          database_url: str | None = None, redis_url: str | None = None) -> None:
    """Serve the annotator and operator API, the labeling page at /label and the
    operator's dashboard at /dashboard.

    Annotators sign in with the token `labelq workers enroll` printed; operator endpoints
    need LABELQ_OPERATOR_TOKEN (unset: they answer 503). Labels are applied by the Celery
    worker (`labelq run-worker`), which must run too.
    """
    import uvicorn

    from labelq.api.onewrite import install
    install()  # the hot path's answers in one write (labelq/api/onewrite.py)
    from ._common import use_locations
    # checked here, so a bad setting fails before any fork; the options set the variables
    # each --workers process reads
    settings = use_locations(database_url, redis_url)
    from labelq.record.location import open_configured
    engine = open_configured(settings)  # and a missing database (exit 9, saying where
    # it looked), and a copy of another database (exit 9, before any process starts)
    from ._common import hot_redis
    hot_redis(engine, settings.redis_url)
    if not settings.operator_token:
        click.echo("note: LABELQ_OPERATOR_TOKEN is unset; operator endpoints are disabled",
                   err=True)
    shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1") else host
    click.echo(f"labeling page: http://{shown}:{port}/label · operator dashboard: "
               f"http://{shown}:{port}/dashboard · API schema: "
               f"http://{shown}:{port}/docs · labels are applied by 'labelq run-worker'", err=True)
    # the access log's lines are INFO: below that level they are dropped, so uvicorn need
    # not format one per request (about 2 % of a busy API process's CPU)
    opts = _ServerOptions(host=host, port=port, log_level=log_level, proxy_headers=False,
                          server_header=False, timeout_graceful_shutdown=10,
                          timeout_keep_alive=keep_alive,
                          access_log=log_level in ("info", "debug"))
    if workers > 1:  # each process builds its own app (engine, Redis, service)
        uvicorn.run("cli.serve:app_from_env", factory=True, workers=workers, **opts)
    else:
        uvicorn.run(app_from_env(settings), **opts)


def app_from_env(settings: Settings | None = None) -> FastAPI:
    """The application with the ``LABELQ_*`` settings and the Celery task sender (the
    factory each ``--workers`` process calls)."""
    from labelq.api import create_app
    from labelq.api.onewrite import install
    from labelq.hooks import deliver_at_once
    from workers.client import send_task
    from workers.hooks import send_delivery
    install()  # in each --workers process too (spawned: the parent's install is not theirs)
    # the webhook events this process commits (an annotator paused or resumed by the
    # operator) are sent for delivery at once, not at the next beat, by the one sender the
    # workers and the commands use too (to the hooks' queue of the event's database)
    deliver_at_once(send_delivery)
    return create_app(settings or load_settings(), send_task=send_task)


commands = [serve]
