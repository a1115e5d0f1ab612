"""``labelq hooks add|list|remove|test|deliveries``: a project's webhooks (docs/hooks.md)."""

from __future__ import annotations

import click

from ._common import DB_OPTION, OUTPUT_OPTION, Output, emit, emit_record, engine

# the events, for --help (labelq.record.hooks.EVENTS; spelled here so that --help imports
# no database library: tests/foundation/test_cli_start.py)
EVENT_NAMES = ("project.finished, project.stalled, annotator.paused, annotator.resumed, "
               "budget.below, export.ready, gold.seen_through")


@click.group()
def hooks() -> None:
    """Webhooks: POST a project's events, signed, to a URL of yours (docs/hooks.md)."""


@hooks.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--events", "events", multiple=True,
              help=f"Events to send, comma-separated or repeated: {EVENT_NAMES}; 'all': every "
                   "one (budget.below with --budget-below). Required unless --budget-below "
                   "is given.")
@click.option("--budget-below", type=float, default=None,
              help="budget.below fires when less than this share of the budget is left "
                   "(e.g. 0.2); implies --events budget.below.")
@click.option("--name", "hook_name", default=None,
              help="The hook's name in this project (default: the URL's host, made unique).")
@DB_OPTION
@OUTPUT_OPTION
def add(name: str, url: str, events: tuple[str, ...], budget_below: float | None,
        hook_name: str | None, database_url: str | None, output: Output) -> None:
    """Add a webhook to project NAME posting to URL (http or https); prints its signing
    secret once."""
    from labelq.record.db import session_scope
    from labelq.record.hooks import add_hook, check_url, default_name, parse_events
    from labelq.record.projects import get_project

    check_url(url)  # (before the database is opened: a bad URL is refused as such)
    # (--budget-below alone: budget.below only)
    kinds = parse_events(list(events)) if events or budget_below is None else []
    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        if hook_name is None:
            hook_name = default_name(s, project, url)
        hook, secret = add_hook(s, project, hook_name, url, kinds, budget_below)
        record = {"project": name, "name": hook.name, "url": hook.url,
                  "events": hook.events, "budget_below": hook.budget_below, "secret": secret}
    # shown once the hook is committed: a secret printed before a failed commit named a
    # hook that was never saved
    emit_record(record, output)
    if output == "table":
        click.echo("(the secret is shown only now: the receiver checks X-Labelq-Signature "
                   "with it; docs/hooks.md)", err=True)


@hooks.command("list")
@click.argument("name")
@DB_OPTION
@OUTPUT_OPTION
def list_cmd(name: str, database_url: str | None, output: Output) -> None:
    """Project NAME's webhooks, with their events pending, delivered and failed."""
    from labelq.record.db import session_scope
    from labelq.record.hooks import hook_view, list_hooks
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        project = get_project(s, name)
        rows = [hook_view(s, h) for h in list_hooks(s, project)]
    emit(rows, output, ["name", "url", "events", "budget_below", "pending", "delivered",
                        "failed", "created"])


@hooks.command("remove")
@click.argument("name")
@click.argument("hook")
@DB_OPTION
@OUTPUT_OPTION
def remove(name: str, hook: str, database_url: str | None, output: Output) -> None:
    """Remove webhook HOOK of project NAME, with its undelivered events and its log."""
    from labelq.record.db import session_scope
    from labelq.record.hooks import get_hook, remove_hook
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        h = get_hook(s, get_project(s, name), hook)
        url = h.url
        remove_hook(s, h)
    emit_record({"project": name, "name": hook, "url": url, "removed": True}, output)


@hooks.command("test")
@click.argument("name")
@click.argument("hook")
@DB_OPTION
@OUTPUT_OPTION
def test(name: str, hook: str, database_url: str | None, output: Output) -> None:
    """Send a `ping` event to webhook HOOK of project NAME now, and show the answer. One
    that fails stays in the outbox: the worker retries it. Exit code 9 if the receiver
    did not answer 2xx."""
    from labelq.errors import ServiceUnavailable
    from labelq.hooks import deliver
    from labelq.record.db import session_scope
    from labelq.record.hooks import PING, emit_to, get_hook
    from labelq.record.projects import get_project
    from labelq.record.settings import load_settings

    eng = engine(database_url)
    with session_scope(eng) as s:
        h = get_hook(s, get_project(s, name), hook)
        event = emit_to(s, h, PING, {"hook": h.name, "events": list(h.events)})
        event_id, url = event.id, h.url
    attempt = deliver(eng, event_id, allowed=load_settings().hook_networks)
    if attempt is None:  # (removed meanwhile)
        raise ServiceUnavailable(f"hook {hook!r} is gone", hook=hook)
    emit_record({"project": name, "name": hook, "url": url, "event": attempt.event,
                 "status": attempt.status, "error": attempt.error,
                 "duration_ms": round(attempt.duration_ms, 1), "state": attempt.state},
                output)
    if attempt.state != "delivered":
        raise ServiceUnavailable(
            f"hook {hook!r} at {url} answered "
            + (f"HTTP {attempt.status}" if attempt.status is not None else
               f"nothing ({attempt.error})")
            + "; the ping stays in the outbox and the worker retries it", hook=hook)


@hooks.command("deliveries")
@click.argument("name")
@click.argument("hook")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="The latest attempts to show.")
@DB_OPTION
@OUTPUT_OPTION
def deliveries_cmd(name: str, hook: str, limit: int, database_url: str | None,
                   output: Output) -> None:
    """Delivery attempts of webhook HOOK of project NAME, newest first: event, try,
    HTTP status or error, duration, and the event's state (pending, delivered, failed)."""
    from labelq.record.db import session_scope
    from labelq.record.hooks import deliveries, get_hook
    from labelq.record.projects import get_project

    with session_scope(engine(database_url)) as s:
        rows = deliveries(s, get_hook(s, get_project(s, name), hook), limit)
    emit(rows, output, ["at", "event", "type", "attempt", "status", "error", "duration_ms",
                        "state"])


commands = [hooks]
