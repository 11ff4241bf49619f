"""The FastAPI application: routers, error mapping, limits, and the shared clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from api.errors import error_response, install_error_handlers
from api.routes import decisions, health, runs
from api.temporal_gateway import TemporalGateway
from persistence.db import create_pool
from waystation.database import resolve_database_url
from waystation.settings import Settings
from waystation.temporal_client import connect_temporal

_BODY_METHODS = {"POST", "PUT", "PATCH"}


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.pool = await create_pool(resolve_database_url(settings), min_size=1,
                                           max_size=20)
        app.state.temporal = TemporalGateway(lambda: connect_temporal(settings))
        try:
            yield
        finally:
            await app.state.pool.close()

    app = FastAPI(
        title="Waystation",
        version="0.1.0",
        summary="Durable AI-agent runs with human decisions, on Temporal and Postgres.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.middleware("http")(_limit_bodies(settings.max_body_bytes))
    for module in (runs, decisions, health):
        app.include_router(module.router)
    return app


def _limit_bodies(max_bytes: int) -> Callable[..., Awaitable[Response]]:
    """Refuse oversize and non-JSON bodies before any route reads them."""

    async def middleware(request: Request,
                         call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method not in _BODY_METHODS:
            return await call_next(request)
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
            return error_response(413, "payload_too_large",
                                  f"request body exceeds {max_bytes} bytes")
        body = await request.body()  # cached by Starlette for the route to read again
        if len(body) > max_bytes:
            return error_response(413, "payload_too_large",
                                  f"request body exceeds {max_bytes} bytes")
        content_type = request.headers.get("content-type", "")
        if body and content_type.split(";")[0].strip().lower() != "application/json":
            return error_response(415, "unsupported_media_type",
                                  "request body must be application/json")
        return await call_next(request)

    return middleware
