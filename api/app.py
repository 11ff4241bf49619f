"""The FastAPI application: routers, error mapping, limits, and the shared clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg
from fastapi import FastAPI

from api.errors import BODY_ONLY_ERRORS, ERROR_RESPONSES, install_error_handlers
from api.event_hub import EventHub
from api.limits import BODY_METHODS, BodyLimits
from api.routes import decisions, graphs, health, items, jobs, messages, runs, streams
from api.temporal_gateway import TemporalGateway
from persistence.db import create_pool
from waystation.database import resolve_database_url
from waystation.registry import Registry, load_registry
from waystation.settings import Settings
from waystation.temporal_client import connect_temporal

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider


def create_app(settings: Settings, *, tracer_provider: TracerProvider | None = None,
               registry: Registry | None = None) -> FastAPI:
    """The app; with a tracer provider (see waystation.telemetry), a server span per request.

    The run kinds come from `registry`, by default the built-ins plus every plug-in
    (raises `waystation.registry.PluginError` when one is broken)."""
    registry = registry or load_registry(settings.plugin_modules)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = resolve_database_url(settings)
        app.state.settings = settings
        app.state.pool = await create_pool(url, min_size=1, max_size=20)
        app.state.temporal = TemporalGateway(lambda: connect_temporal(settings))
        app.state.event_hub = EventHub(app.state.pool, lambda: asyncpg.connect(url),
                                       subscriber_capacity=settings.sse_client_buffer)
        await app.state.event_hub.start()
        try:
            yield
        finally:
            await app.state.event_hub.stop()
            await app.state.pool.close()

    app = FastAPI(
        title="Waystation",
        version="0.1.0",
        summary="Durable AI-agent runs with human decisions, on Temporal and Postgres.",
        lifespan=lifespan,
    )
    app.state.registry = registry
    install_error_handlers(app)
    app.add_middleware(BodyLimits, max_bytes=settings.max_body_bytes)
    app.include_router(runs.create_router(registry), responses=ERROR_RESPONSES)
    for module in (runs, decisions, messages, streams, health, graphs, jobs, items):
        app.include_router(module.router, responses=ERROR_RESPONSES)
    _document_body_errors_only_where_there_is_a_body(app)
    if tracer_provider is not None:
        from waystation.telemetry import instrument_app

        instrument_app(app, tracer_provider)
    return app


def _document_body_errors_only_where_there_is_a_body(app: FastAPI) -> None:
    """Conflicts and body refusals (409, 413, 415) are documented on POST routes only."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for operations in generate()["paths"].values():
                for method, operation in operations.items():
                    if method.upper() not in BODY_METHODS:
                        for status in BODY_ONLY_ERRORS:
                            operation["responses"].pop(str(status), None)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
