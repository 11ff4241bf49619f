"""The FastAPI application: routers, error mapping, limits, and the shared clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import asyncpg
from fastapi import FastAPI

from api.errors import install_error_handlers
from api.event_hub import EventHub
from api.limits import BodyLimits
from api.routes import decisions, graphs, health, items, jobs, runs, streams
from api.temporal_gateway import TemporalGateway
from persistence.db import create_pool
from waystation.database import resolve_database_url
from waystation.settings import Settings
from waystation.temporal_client import connect_temporal

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider


def create_app(settings: Settings, *, tracer_provider: TracerProvider | None = None) -> FastAPI:
    """The app; with a tracer provider (see waystation.telemetry), a server span per request."""
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
    install_error_handlers(app)
    app.add_middleware(BodyLimits, max_bytes=settings.max_body_bytes)
    for module in (runs, decisions, streams, health, graphs, jobs, items):
        app.include_router(module.router)
    if tracer_provider is not None:
        from waystation.telemetry import instrument_app

        instrument_app(app, tracer_provider)
    return app
