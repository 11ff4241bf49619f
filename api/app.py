"""The FastAPI application: routers, error mapping, limits, and the shared clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from waystation.api.errors import BODY_ONLY_ERRORS, ERROR_RESPONSES, install_error_handlers
from waystation.api.event_hub import EventHub
from waystation.api.hosts import TrustedHosts
from waystation.api.identity import IdentityProvider
from waystation.api.limits import BODY_METHODS, BodyLimits
from waystation.api.metrics import ApiMetrics, HttpMetrics
from waystation.api.oidc import OidcClient
from waystation.api.protocols import a2a
from waystation.api.protocols.a2a.card import RPC_PATH
from waystation.api.protocols.ag_ui import router as ag_ui
from waystation.api.protocols.mcp import server as mcp
from waystation.api.protocols.slack import router as slack
from waystation.api.rate_limits import Limiter, UserLimits
from waystation.api.routes import (
    admin,
    analytics,
    api_keys,
    console,
    contacts,
    decide_links,
    decisions,
    groups,
    health,
    metrics,
    policies,
    runs,
    streams,
    webhooks,
)
from waystation.api.security_headers import SecurityHeaders
from waystation.api.services.metrics import CachedFigures
from waystation.api.shutdown import Shutdown
from waystation.api.temporal_gateway import TemporalGateway
from waystation.database import login_url
from waystation.heap import startup_heap_frozen
from waystation.persistence.claims import API_ROLE
from waystation.persistence.db import create_pool
from waystation.registry import Registry, load_registry
from waystation.settings import Settings
from waystation.temporal_client import connect_temporal

ROUTERS = (runs, decisions, streams, health, metrics, groups,
           webhooks, contacts, decide_links, api_keys, admin, ag_ui, slack, policies,
           analytics)

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
        # As `waystation_api` itself, not the owner: no `RESET ROLE` leaves row-level security.
        url = login_url(settings, API_ROLE)
        app.state.settings = settings
        app.state.pool = await create_pool(url, min_size=1, max_size=20, role=API_ROLE)
        app.state.temporal = TemporalGateway(lambda: connect_temporal(settings))
        app.state.event_hub = EventHub(app.state.pool, lambda: asyncpg.connect(url),
                                       subscriber_capacity=settings.sse_client_buffer)
        await app.state.event_hub.start()
        await limiter.start(app.state.pool)
        app.state.shutdown.on_begin(app.state.event_hub.close_streams)
        try:
            async with mcp.serving(mcp_sessions):
                with startup_heap_frozen():
                    yield
        finally:
            await limiter.stop()
            await app.state.event_hub.stop()
            await app.state.pool.close()

    app = FastAPI(
        title="Waystation",
        version="0.1.0",
        summary="Durable AI-agent runs with human decisions, on Temporal and Postgres.",
        lifespan=lifespan,
        # Operation ids are the route functions' names: stable for generated clients.
        generate_unique_id_function=lambda route: route.name,
    )
    # Begun by the server on SIGTERM (see waystation.api.shutdown.ApiServer), before the lifespan
    # ends.
    app.state.shutdown = Shutdown()
    app.state.registry = registry
    app.state.identity_provider = identity_provider(settings)
    app.state.oidc = OidcClient.from_settings(settings)
    install_error_handlers(app)
    app.add_middleware(BodyLimits, max_bytes=settings.max_body_bytes)
    routers = [runs.create_router(registry), *(module.router for module in ROUTERS),
               *registry.routers()]
    # Every API route, flat: since FastAPI 0.16x `app.router.routes` holds included routers
    # as opaque wrappers without a path template.
    app.state.routes = [route for router in routers for route in router.routes]
    app.state.metrics = ApiMetrics()
    app.state.metrics_figures = CachedFigures(settings.metrics_cache_seconds,
                                              registry.metrics())
    app.add_middleware(HttpMetrics, metrics=app.state.metrics, routes=app.state.routes)
    limiter = app.state.limiter = Limiter(max_streams=settings.max_streams_per_user,
                                          writes_per_minute=settings.writes_per_minute,
                                          lease_seconds=settings.stream_lease_seconds)
    app.add_middleware(UserLimits, limiter=limiter, jwt_secret=settings.jwt_secret,
                       dispatched=frozenset({RPC_PATH, mcp.PATH}))
    if settings.cors_origin_list:
        # Outside the limits, so a refusal (401, 429) still carries the headers a browser
        # needs to read it; preflights are answered here. Without credentials: another origin
        # sends a bearer token, never rides a console session's cookie.
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origin_list,
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Last-Event-ID",
                                          "Idempotency-Key"])
    # Before credentials, limits and routes (the MCP endpoint and the A2A card included): a
    # request for a name this server is not served under is a DNS-rebinding attempt.
    app.add_middleware(TrustedHosts, allowed=settings.allowed_host_list)
    app.add_middleware(SecurityHeaders)  # outermost: refusals and errors get the headers too
    for router in routers:
        app.include_router(router, responses=ERROR_RESPONSES)
    mcp_sessions = mcp.mount_mcp(app, registry, settings)
    _document_body_errors_only_where_there_is_a_body(app)
    app.include_router(console.router)
    app.include_router(a2a.create_router(registry))
    app.mount(console.STATIC_PATH, StaticFiles(directory=console.static_directory()),
              name="console-static")
    if tracer_provider is not None:
        from waystation.telemetry import instrument_app

        instrument_app(app, tracer_provider)
    return app


def identity_provider(settings: Settings) -> IdentityProvider | None:
    if settings.jwks_url is None:
        return None
    assert settings.jwt_audience and settings.jwt_issuer, "Settings requires both with a JWKS"
    return IdentityProvider(settings.jwks_url, audience=settings.jwt_audience,
                            issuer=settings.jwt_issuer, leeway_seconds=settings.jwt_leeway_seconds)


def _document_body_errors_only_where_there_is_a_body(app: FastAPI) -> None:
    """Conflicts and body refusals (403, 409, 413, 415) are documented on POST routes only,
    and on any other route that declares them itself (a group's last owner, a decision link)."""
    generate = app.openapi
    declared = {(route.path, method.lower(), str(status)) for route in app.state.routes
                if isinstance(route, APIRoute) for method in route.methods or ()
                for status in route.responses}

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for path, operations in generate()["paths"].items():
                for method, operation in operations.items():
                    if method.upper() not in BODY_METHODS:
                        for status in BODY_ONLY_ERRORS:
                            if (path, method, str(status)) not in declared:
                                operation["responses"].pop(str(status), None)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
