"""``labelq serve``: the HTTP API and the labeling page (uvicorn)."""

from __future__ import annotations

import click

from labelq.settings import load_settings


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, envvar="LABELQ_HOST",
              help="Interface to listen on (0.0.0.0 for every interface) [env: LABELQ_HOST].")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              envvar="LABELQ_PORT", help="TCP port [env: LABELQ_PORT].")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(host: str, port: int, log_level: str) -> None:
    """Serve the annotator and operator API and the labeling page at /label.

    Annotators sign in with the token `labelq workers enroll` printed; operator endpoints
    need LABELQ_OPERATOR_TOKEN (unset: they answer 503). Labels are applied by the Celery
    worker (`labelq worker`), which must run too.
    """
    import uvicorn

    from labelq.api import create_app
    from workers.client import send_task

    settings = load_settings()
    app = create_app(settings, send_task=send_task)
    if not settings.operator_token:
        click.echo("note: LABELQ_OPERATOR_TOKEN is unset; operator endpoints are disabled",
                   err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False,
                server_header=False, timeout_graceful_shutdown=10)


commands = [serve]
