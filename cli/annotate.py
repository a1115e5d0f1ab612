"""``labelq annotate next|current|submit|decline|progress``: label from a shell through the
HTTP API.

The annotator's token comes from ``--token`` or ``LABELQ_TOKEN``; the server from
``--api-url`` or ``LABELQ_API_URL``. Like ``labelq next HANDLE`` (which needs direct
database and Redis access, and the token too), but through ``labelq serve``, which checks
the token and that the assignment is yours. Errors keep the documented exit codes (4 not found, 5 conflict,
6 forbidden or bad token, 3 invalid label, 9 server unreachable).
"""

from __future__ import annotations

from typing import Any

import click

from labelq.errors import Conflict, Forbidden, InputError, LabelqError, NotFound, ServiceUnavailable

from ._common import (
    OUTPUT_OPTION,
    Output,
    emit,
    emit_next,
    emit_nothing,
    emit_record,
    emit_submission,
)

_BY_STATUS = {401: Forbidden, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Conflict,
              413: InputError, 422: InputError, 503: ServiceUnavailable}

_TOKEN = click.option("--token", envvar="LABELQ_TOKEN", required=True,
                      help="Your annotator token [env: LABELQ_TOKEN].")


def _keep_project(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    ctx.meta["labelq.project"] = value or None


# (not a parameter of the commands: ``call`` sends it, as ``?project=NAME``, on every call)
_PROJECT = click.option("--project", envvar="LABELQ_PROJECT", default=None, expose_value=False,
                        callback=_keep_project,
                        help="The project to work in, when you are enrolled in several "
                             "(else your only one, or your default) [env: LABELQ_PROJECT].")


def TOKEN_OPTION(f: Any) -> Any:  # noqa: N802 - used as the option decorators are
    """``--token`` and ``--project``."""
    return _TOKEN(_PROJECT(f))
API_OPTION = click.option("--api-url", envvar="LABELQ_API_URL",
                          default="http://127.0.0.1:8000", show_default=True,
                          help="The labelq server [env: LABELQ_API_URL].")


def call(api_url: str, token: str, method: str, path: str,
         body: dict[str, Any] | None = None) -> dict[str, Any]:
    import httpx

    url = api_url.rstrip("/") + "/api/v1" + path
    ctx = click.get_current_context(silent=True)
    project = ctx.meta.get("labelq.project") if ctx is not None else None
    if project:
        from urllib.parse import quote
        url += ("&" if "?" in url else "?") + "project=" + quote(project, safe="")
    try:
        r = httpx.request(method, url, json=body, timeout=30,
                          headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise ServiceUnavailable(f"the labelq server at {api_url} does not answer: {exc}"
                                 ) from exc
    try:
        data: dict[str, Any] = r.json()
    except ValueError:
        data = {"message": r.text[:200]}
    if r.is_error:
        cls = _BY_STATUS.get(r.status_code, LabelqError)
        raise cls(f"{data.get('message', r.reason_phrase)} ({data.get('code', r.status_code)})")
    return data


@click.group("annotate")
def annotate() -> None:
    """Label from a shell through the HTTP API, with your token."""


@annotate.command("next")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
def next_(token: str, api_url: str, output: Output) -> None:
    """Get your next assignment (its id, the task payload and the label set)."""
    out = call(api_url, token, "POST", "/assignments/next")
    emit_next(out["assignment"], out.get("message") or "no task for you now", output)


@annotate.command("current")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
def current(token: str, api_url: str, output: Output) -> None:
    """The assignments you hold now (issued, not yet answered, declined or expired), without
    taking a new one; `next` would return the same one again."""
    held = call(api_url, token, "GET", "/assignments/current")["assignments"]
    if output == "json":  # the API's answer: {"assignments": [...]}, a list however many
        if not held:
            click.echo("you hold no assignment now (labelq annotate next takes one)", err=True)
        emit_record({"assignments": held}, output)
        return
    if not held:
        emit_nothing("you hold no assignment now (labelq annotate next takes one)", output)
        return
    if output == "table":
        for i, a in enumerate(held):
            if i:
                click.echo("")
            emit_record(a, output)
    else:
        emit(held, output)


@annotate.command("submit")
@click.argument("assignment")
@click.argument("label")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
@click.option("--next", "then_next", is_flag=True,
              help="Also take your next assignment, in the same request (printed after "
                   "the submission; with -o json, as its `next` field, null when there is "
                   "none; on stderr why there is none).")
def submit(assignment: str, label: str, token: str, api_url: str, output: Output,
           then_next: bool) -> None:
    """Answer ASSIGNMENT with LABEL (safe to repeat)."""
    path = f"/assignments/{assignment}/label" + ("?next=true" if then_next else "")
    out = call(api_url, token, "POST", path, {"label": label})
    nxt = out.pop("next", None)
    emit_submission(out, (nxt or {}).get("assignment"), then_next,
                    (nxt or {}).get("message") or "no task for you now", output)


@annotate.command("decline")
@click.argument("assignment")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
def decline(assignment: str, token: str, api_url: str, output: Output) -> None:
    """Give ASSIGNMENT back to the pool."""
    emit_record(call(api_url, token, "POST", f"/assignments/{assignment}/decline"), output)


@annotate.command("projects")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
def projects(token: str, api_url: str, output: Output) -> None:
    """The projects your token works in (and `current`: where a command without --project
    works)."""
    out = call(api_url, token, "GET", "/me/projects")
    if output == "json":
        emit_record(out, output)
        return
    emit([{**p, "current": p["name"] == out["current"]} for p in out["projects"]], output)


@annotate.command("progress")
@TOKEN_OPTION
@API_OPTION
@OUTPUT_OPTION
def progress(token: str, api_url: str, output: Output) -> None:
    """Your labels, gold results and remaining capacity."""
    out = call(api_url, token, "GET", "/me/progress")
    if output == "json":  # the API's answer, gold nested as there
        emit_record(out, output)
        return
    gold = out.pop("gold")
    out.update({f"gold_{k}": v for k, v in gold.items()})
    emit_record(out, output)


commands = [annotate]
