"""BodyLimit's larger limit for a route that takes a file (the predictions route): the
body passes through unbuffered, counted, and one streamed past that limit is a 413 in the
route reading it; every other route keeps the small limit."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI, Request

from labelq.api.errors import install_error_handlers
from labelq.api.limits import BodyLimit
from labelq.api.operator import PREDICTIONS_PATH


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/api/v1/projects/{name}/predictions")
    async def take(request: Request) -> dict[str, int]:
        n = 0
        async for chunk in request.stream():
            n += len(chunk)
        return {"bytes": n}

    @app.post("/other")
    async def other(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    app.add_middleware(BodyLimit, max_bytes=1024, larger=[(PREDICTIONS_PATH, 4096)])
    return app


def _post(path: str, size: int) -> httpx.Response:
    async def chunks():  # no Content-Length: the middleware must count
        for start in range(0, size, 500):
            yield b"x" * min(500, size - start)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(path, content=chunks())

    return asyncio.run(go())


def test_the_predictions_route_has_its_own_limit():
    ok = _post("/api/v1/projects/p/predictions", 3000)
    assert ok.status_code == 200 and ok.json() == {"bytes": 3000}
    over = _post("/api/v1/projects/p/predictions", 5000)
    assert over.status_code == 413 and over.json()["code"] == "payload_too_large"
    assert "4096 bytes" in over.json()["message"]
    assert _post("/other", 1000).json() == {"bytes": 1000}
    small = _post("/other", 3000)
    assert small.status_code == 413 and "1024 bytes" in small.json()["message"]
    # (a path that only resembles it keeps the small limit)
    assert _post("/api/v1/projects/p/predictions/x", 3000).status_code == 413
