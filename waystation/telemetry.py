"""OpenTelemetry tracing: one trace from an API request through Temporal into activities and SQL.

`WAYSTATION_OTEL_EXPORTER` picks where spans go:

- `none` (the default): nothing is configured, no provider is set, nothing is instrumented.
- `console`: spans are printed to stdout as JSON, batched.
- `otlp`: spans are sent over OTLP/HTTP, batched; the exporter reads its endpoint from
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (and headers,
  timeout, ... from the other standard `OTEL_EXPORTER_OTLP_*` variables).

Context crosses Temporal through `TracingInterceptor` (see temporal_client.py), which uses the
global tracer provider set here; HTTP spans come from `instrument_app`, SQL spans from asyncpg.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

from waystation.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

EXPORTERS = ("none", "console", "otlp")
# Health probes and scrapes every few seconds would bury the traces worth reading: no server
# span, and no root SQL spans from the probe's own queries.
QUIET_PATHS = ("/healthz", "/livez", "/readyz", "/metrics")

_lock = threading.Lock()
_provider: TracerProvider | None = None


def configure_tracing(settings: Settings, service_name: str) -> TracerProvider | None:
    """Set the process's tracer provider per `settings.otel_exporter`; None when tracing is off.

    Idempotent: later calls return the provider of the first one that enabled tracing.
    """
    global _provider
    exporter_name = settings.otel_exporter
    if exporter_name not in EXPORTERS:
        raise ValueError(f"WAYSTATION_OTEL_EXPORTER must be one of {EXPORTERS}, "
                         f"not {exporter_name!r}")
    if exporter_name == "none":
        return _provider
    with _lock:
        if _provider is not None:
            return _provider
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({SERVICE_NAME: settings.otel_service_name or service_name})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(_exporter(exporter_name)))
        trace.set_tracer_provider(provider)
        instrument_asyncpg(provider)
        _provider = provider
        log.info("tracing to %s as %s", exporter_name, resource.attributes[SERVICE_NAME])
        return provider


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def instrument_app(app: FastAPI, tracer_provider: TracerProvider) -> None:
    """A server span per request (none for probes and scrapes), without per-message
    send/receive spans, which for the SSE stream would be one span per event. Call before the
    app starts."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    app.add_middleware(_QuietPaths)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider,
                                       excluded_urls=",".join(QUIET_PATHS),
                                       exclude_spans=["receive", "send"])


class _QuietPaths:
    """Turns instrumentation off (SQL spans included) while serving QUIET_PATHS."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in QUIET_PATHS:
            from opentelemetry.instrumentation.utils import suppress_instrumentation

            with suppress_instrumentation():
                await self.app(scope, receive, send)
        else:
            await self.app(scope, receive, send)


@cache
def _asyncpg_instrumentor():  # one class, so one BaseInstrumentor singleton
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

    class NamedQueryAsyncPGInstrumentor(AsyncPGInstrumentor):
        """The stock instrumentor, with span names and noise fit for Waystation's queries.

        - Every query in persistence/queries/*.sql starts with a `--` comment line, which the
          stock instrumentor (it strips only a leading `/* */` before taking the first word)
          would make every span's name; `BEGIN;` would keep its semicolon. The pattern is only
          used to derive the name; `db.statement` keeps the whole query.
        - The pool resets each connection it gets back (`SELECT pg_advisory_unlock_all(); ...`):
          one span per release says nothing about the request, so it gets none.
        """

        _leading_comment_remover = re.compile(
            r"^(?:\s*(?:/\*.*?\*/|--[^\n]*(?:\n|$)))+|;", re.DOTALL)

        async def _do_execute(self, func, instance, args, kwargs):
            if args and args[0] == getattr(instance, "_reset_query", None):
                return await func(*args, **kwargs)
            return await super()._do_execute(func, instance, args, kwargs)

    return NamedQueryAsyncPGInstrumentor()


def instrument_asyncpg(tracer_provider: TracerProvider) -> None:
    """A client span per asyncpg query, for every connection in the process. Once per process."""
    instrumentor = _asyncpg_instrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=tracer_provider)


def uninstrument_asyncpg() -> None:
    instrumentor = _asyncpg_instrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
