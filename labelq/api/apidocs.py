"""The API's browsable documentation, ``GET /docs`` (Swagger UI) and ``GET /redoc`` (ReDoc),
with every asset served by labelq itself: without internet (an operator's closed network) the
pages render as they do online, and no page of labelq asks another host for anything.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, and Swagger UI's is started by an
inline script, which the pages' policy (``script-src 'self'``) forbids. Here the bundles come
from the ``fastapi-offline`` package (its ``static`` folder: Swagger UI's bundle and CSS,
ReDoc's standalone bundle, FastAPI's favicon; README, design notes, says why that package),
served at ``/docs/assets/<file>``, and Swagger UI is started by a file of labelq's own,
``/docs/assets/swagger-init.js``, which reads the schema's URL from the page.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse

__all__ = ["ASSETS", "ASSETS_PATH", "DOCS_CSP", "install_docs", "vendor_dir"]

ASSETS_PATH = "/docs/assets"
# scripts and styles from this server only; Swagger UI and ReDoc set inline styles and draw
# icons as data: images; ReDoc runs its search in a worker it makes from a blob
DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
            "worker-src 'self' blob:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
_HEADERS = {"Content-Security-Policy": DOCS_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
_INIT = Path(__file__).with_name("static") / "swagger-init.js"


def vendor_dir() -> Path:
    """The folder of the ``fastapi-offline`` package's copies of the bundles."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).with_name("static")


#: every asset the two pages load, by its file name under :data:`ASSETS_PATH`
ASSETS: dict[str, tuple[str, str]] = {  # name -> (where: "vendor" or "labelq", media type)
    "swagger-ui-bundle.js": ("vendor", "text/javascript; charset=utf-8"),
    "swagger-ui.css": ("vendor", "text/css; charset=utf-8"),
    "redoc.standalone.js": ("vendor", "text/javascript; charset=utf-8"),
    "favicon.png": ("vendor", "image/png"),
    "swagger-init.js": ("labelq", "text/javascript; charset=utf-8"),
}


def _asset_file(name: str) -> Path:
    return _INIT if ASSETS[name][0] == "labelq" else vendor_dir() / name


def _swagger_page(title: str, openapi_url: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)} - Swagger UI</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
<link rel="icon" href="{ASSETS_PATH}/favicon.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{escape(openapi_url)}"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_PATH}/swagger-init.js"></script>
</body>
</html>
"""


def _redoc_page(title: str, openapi_url: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} - ReDoc</title>
<link rel="icon" href="{ASSETS_PATH}/favicon.png">
<style>body {{ margin: 0; padding: 0; }}</style>
</head>
<body>
<redoc spec-url="{escape(openapi_url)}"></redoc>
<script src="{ASSETS_PATH}/redoc.standalone.js"></script>
</body>
</html>
"""


def install_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Add the two pages and their assets to ``app`` (made with ``docs_url=None,
    redoc_url=None``, so that FastAPI adds its CDN pages not)."""
    openapi_url = app.openapi_url or "/openapi.json"
    swagger = _swagger_page(app.title, openapi_url)
    redoc = _redoc_page(app.title, openapi_url)

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return HTMLResponse(swagger, headers=_HEADERS)

    @app.get(redoc_url, include_in_schema=False)
    def redoc_ui() -> HTMLResponse:
        return HTMLResponse(redoc, headers=_HEADERS)

    def asset_route(name: str, media_type: str) -> None:
        def asset() -> FileResponse:
            """A file the documentation pages load (a static asset: not in the schema)."""
            return FileResponse(_asset_file(name), media_type=media_type,
                                headers={"X-Content-Type-Options": "nosniff",
                                         "Cache-Control": "no-cache"})
        app.add_api_route(f"{ASSETS_PATH}/{name}", asset, methods=["GET"],
                          include_in_schema=False, name=f"docs asset {name}")

    for name, (_, media_type) in ASSETS.items():
        asset_route(name, media_type)
