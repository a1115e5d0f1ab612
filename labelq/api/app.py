"""The app factory: ``create_app(settings)`` wires the engine, Redis, the service and the
Celery client into one FastAPI application.

Routes: the annotator API (:mod:`.annotator`), the operator API (:mod:`.operator`), the
review API (:mod:`.review`, ``/review/api``), the labeling page ``GET /label``, the
operator's dashboard ``GET /dashboard``, the expert's review page ``GET /review`` (their
shared script ``GET /static/common.js`` and each page's own, ``/static/label.js``,
``/static/dashboard.js`` and ``/static/review.js``: no script is inline, :data:`PAGE_CSP`),
``GET /healthz``, and the OpenAPI schema at ``/openapi.json`` (browsable at ``/docs`` and
``/redoc``, their assets served by labelq itself: :mod:`.apidocs`). Route handlers are
plain ``def`` (FastAPI runs them in its thread pool: the service does blocking SQL and
Redis I/O), except the two hot ones — ``POST /api/v1/assignments/next`` and ``POST
/api/v1/assignments/{id}/label`` — which are ``async def`` and return a ready JSON
``Response``, so FastAPI neither validates nor serialises a response model for them (their
``response_model`` still documents the schema): ``next`` makes one explicit thread-pool
call (service call and answer body together); a label goes the way the hot path's does
(:func:`.annotator.submit_body`: :meth:`~labelq.service.Service.submit_async`, whose batch
the committer thread runs, and at most one thread-pool call). The annotator's sign-in dependency is
``async`` (a cached sign-in costs no thread hop). The :class:`~labelq.service.Service` and
its state cache are thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import text
from starlette.types import Receive, Scope, Send

from .. import __version__
from ..errors import ServiceUnavailable
from ..record.db import database_id
from ..record.location import open_configured
from ..record.settings import Settings, load_settings
from ..service import Service
from . import annotator, operator, review
from .apidocs import install_docs
from .committer import Committer
from .errors import install_error_handlers
from .fastpath import HotPath
from .limits import DEFAULT_MAX_BODY, BodyLimit
from .runtime import Runtime
from .schemas import HealthOut

__all__ = ["create_app", "Runtime", "LABEL_PAGE", "DASHBOARD_PAGE", "REVIEW_PAGE", "COMMON_SCRIPT",
           "COMMON_SCRIPT_PATH", "PAGE_SCRIPTS", "PAGE_CSP"]

LABEL_PAGE = Path(__file__).with_name("static") / "label.html"
DASHBOARD_PAGE = Path(__file__).with_name("static") / "dashboard.html"
REVIEW_PAGE = Path(__file__).with_name("static") / "review.html"
# the two pages' shared JavaScript (say, call), loaded by both from COMMON_SCRIPT_PATH
COMMON_SCRIPT = Path(__file__).with_name("static") / "common.js"
COMMON_SCRIPT_PATH = "/static/common.js"
# every script the pages load, by the path it is served at: common.js, then each page's
# own (a file, not inline: the pages' CSP allows scripts from this server only)
PAGE_SCRIPTS = {COMMON_SCRIPT_PATH: COMMON_SCRIPT,
                "/static/label.js": COMMON_SCRIPT.with_name("label.js"),
                "/static/dashboard.js": COMMON_SCRIPT.with_name("dashboard.js"),
                "/static/review.js": COMMON_SCRIPT.with_name("review.js")}
# scripts only from this server ('self': the files above; no inline script, no event
# handler attribute, no eval); styles inline (the pages' <style> and the charts' SVG)
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
            "img-src http: https: data:; connect-src 'self'; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")
_PAGE_HEADERS = {
    "Content-Security-Policy": PAGE_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# the script as the pages: no sign-in, not cached (a page and its script change together)
_SCRIPT_HEADERS = {k: v for k, v in _PAGE_HEADERS.items() if k != "Content-Security-Policy"}


def create_app(settings: Settings | None = None, *, max_body: int = DEFAULT_MAX_BODY,
               export_dir: str | Path = "exports",
               send_task: Callable[[str, list[Any]], None] | None = None) -> FastAPI:
    """The application. ``send_task(name, args)`` enqueues a worker task by name
    (``workers.client.send_task``; the core never imports Celery). Without it labels are
    still applied — the beat wakes the applier — but export jobs cannot start (503).
    Export files are written by the Celery worker into ``export_dir`` (relative to the
    working directory) and served from there: the API and the worker must share that
    directory (same host, or one volume mounted at the same path)."""
    import redis as redis_lib

    from ..live.redis.connect import connect

    settings = settings or load_settings()
    # an existing, initialised database (``labelq init``), never a new empty one: else
    # the server does not start, saying where it looked (exit code 9)
    engine = open_configured(settings)
    redis = connect(settings.redis_url, socket_timeout=10,
                                     health_check_interval=30)
    if send_task is None:
        def send_task(name: str, args: list[Any]) -> None:
            if name != "labelq.apply_labels":  # the beat wakes the applier anyway
                raise ServiceUnavailable("this server has no task queue to run jobs on")

    database = database_id(engine)  # read once: every key and wake-up names it

    def notify(project_id: int) -> None:
        send_task("labelq.apply_labels", [int(project_id), database])

    service = Service(engine, redis, settings=settings, notify=notify)
    app = _App(
        title="labelq", version=__version__,
        summary="Annotator and operator API of a labelq annotation workforce.",
        description="Annotators authenticate with the bearer token their operator gave "
                    "them; operators with `LABELQ_OPERATOR_TOKEN`. Every error is JSON "
                    "with a machine-readable `code` and a `message`.",
        docs_url=None, redoc_url=None)  # (install_docs: served without a CDN)
    install_docs(app)
    app.state.labelq = Runtime(settings, engine, redis, service, send_task,
                                Path(export_dir).resolve(), Committer(service.submitter))
    install_error_handlers(app)
    app.include_router(annotator.router)
    app.include_router(operator.router)
    app.include_router(review.router)

    @app.get("/healthz", response_model=HealthOut, tags=["meta"], summary="Health")
    def healthz(request: Request, response: Response) -> HealthOut:
        rt = request.app.state.labelq
        ok_redis = ok_db = True
        try:
            rt.redis.ping()
        except redis_lib.RedisError:
            ok_redis = False
        try:
            with rt.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception:  # noqa: BLE001 - any failure means "not healthy"
            ok_db = False
        if not (ok_redis and ok_db):
            response.status_code = 503
        return HealthOut(status="ok" if ok_redis and ok_db else "unavailable",
                         redis=ok_redis, database=ok_db)

    @app.get("/label", response_class=HTMLResponse, tags=["annotator"],
             summary="The labeling page")
    def label_page() -> HTMLResponse:
        return HTMLResponse(LABEL_PAGE.read_text(encoding="utf-8"), headers=_PAGE_HEADERS)

    @app.get("/dashboard", response_class=HTMLResponse, tags=["operator"],
             summary="The operator's dashboard page")
    def dashboard_page() -> HTMLResponse:
        """Plain HTML and JavaScript (charts drawn as inline SVG); it asks for the
        operator token and reads ``/api/v1/projects/{name}/dashboard``."""
        return HTMLResponse(DASHBOARD_PAGE.read_text(encoding="utf-8"),
                            headers=_PAGE_HEADERS)

    @app.get("/review", response_class=HTMLResponse, tags=["review"],
             summary="The expert's review page")
    def review_page() -> HTMLResponse:
        """Plain HTML and JavaScript: it asks for a reviewer token (or the operator's) and
        reads and answers through ``/review/api``."""
        return HTMLResponse(REVIEW_PAGE.read_text(encoding="utf-8"), headers=_PAGE_HEADERS)

    def script_route(path: str, file: Path) -> None:
        def script() -> Response:
            """JavaScript the pages load (a static asset: not in the API schema)."""
            return Response(file.read_text(encoding="utf-8"),
                            media_type="text/javascript; charset=utf-8",
                            headers=_SCRIPT_HEADERS)
        app.add_api_route(path, script, methods=["GET"], include_in_schema=False,
                          name=f"script {file.name}")

    for path, file in PAGE_SCRIPTS.items():
        script_route(path, file)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/label")

    app.add_middleware(BodyLimit, max_bytes=max_body,
                       larger=[(operator.PREDICTIONS_PATH, operator.MAX_PREDICTIONS_BODY)])
    app.hot_path = HotPath(app.asgi, app, max_body)
    return app


class _App(FastAPI):
    """The application, whose ASGI entry offers each request to the hot path first
    (:class:`~.fastpath.HotPath`, ahead of the middleware stack); what the hot path does
    not take goes to :meth:`asgi`, FastAPI's own entry."""

    hot_path: HotPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.hot_path is not None:
            await self.hot_path(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)
