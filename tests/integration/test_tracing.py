"""Tracing end to end: one trace from POST /runs through Temporal into activities and SQL.

The global tracer provider can be set only once per process, so nothing here sets it: the test's
provider is handed explicitly to the FastAPI and asyncpg instrumentations and to the Temporal
TracingInterceptor, and the asyncpg instrumentation is removed afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from tests.helpers import IDEA, eventually
from waystation import telemetry
from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.api.temporal_gateway import TemporalGateway
from waystation.settings import Settings
from waystation.worker import build_worker

SECRET = "test-secret-0123456789-0123456789-abcdef"


@pytest.fixture
def tracing() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument_asyncpg(provider)
    try:
        yield provider, exporter
    finally:
        telemetry.uninstrument_asyncpg()
        provider.shutdown()


@pytest_asyncio.fixture
async def traced_api(tracing, migrated_url: str, dev_env, pool, task_queue: str
                     ) -> AsyncIterator[httpx.AsyncClient]:
    provider, _ = tracing
    # The dev server's connection, with tracing headers on every call.
    config = dev_env.client.config()
    config["interceptors"] = [TracingInterceptor(provider.get_tracer("temporalio"))]
    client = Client(**config)
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET,
                        temporal_task_queue=task_queue,
                        temporal_address=dev_env.client.service_client.config.target_host)
    app = create_app(settings, tracer_provider=provider)
    worker = build_worker(client, pool, task_queue=task_queue, backend=backend_named("offline"))

    async def connect() -> Client:
        return client

    async with app.router.lifespan_context(app), worker:
        app.state.temporal = TemporalGateway(connect)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


def _parent_chain(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    """The span's ancestors, nearest first."""
    chain = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain


def _describe(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> str:
    return " <- ".join(s.name for s in [span, *_parent_chain(span, by_id)])


async def test_one_trace_from_http_through_temporal_to_sql(traced_api, tracing):
    _, exporter = tracing
    headers = {"Authorization": f"Bearer {issue_token(SECRET, 'tracer')}"}
    assert (await traced_api.get("/healthz")).status_code == 200
    body = {"kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": []}}
    created = await traced_api.post("/runs", json=body, headers=headers)
    assert created.status_code == 201, created.text
    run_id = uuid.UUID(created.json()["run_id"])

    async def completed() -> bool:
        run = (await traced_api.get(f"/runs/{run_id}", headers=headers)).json()
        assert run["status"] not in ("failed", "canceled"), run
        return run["status"] == "completed"
    await eventually(completed, timeout=120)

    async def workflow_completed() -> bool:
        names = {s.name for s in exporter.get_finished_spans()}
        return "CompleteWorkflow:ValidationRun" in names
    await eventually(workflow_completed)

    spans = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}

    [server] = [s for s in spans if s.kind is SpanKind.SERVER and s.name == "POST /runs"]
    assert server.parent is None, "the request span is the trace's root"
    # No spans for health probes (nor their SQL), nor per ASGI message (`... http send`).
    assert not [s for s in spans if "healthz" in s.name or s.name.endswith(("send", "receive"))]
    assert not [s for s in spans if s.attributes.get("db.statement") == "SELECT 1"]
    trace_id = server.context.trace_id
    in_trace = [s for s in spans if s.context.trace_id == trace_id]

    def named(name: str) -> list[ReadableSpan]:
        found = [s for s in in_trace if s.name == name]
        assert found, f"no {name} span in the request's trace: {sorted({s.name for s in in_trace})}"
        return found

    # The request's own SQL (inserting the run) is a child of the request.
    assert any(server in _parent_chain(s, by_id) for s in in_trace
               if s.attributes.get("db.system") == "postgresql")

    # Temporal's interceptor makes the workflow's spans children of StartWorkflow: RunWorkflow
    # and CompleteWorkflow mark the workflow's start and end, and each activity's
    # StartActivity (scheduled by the workflow) is the parent of its RunActivity (the worker).
    [start] = named("StartWorkflow:ValidationRun")
    assert start.parent.span_id == server.context.span_id, _describe(start, by_id)
    for name in ("RunWorkflow:ValidationRun", "CompleteWorkflow:ValidationRun"):
        [marker] = named(name)
        assert marker.parent.span_id == start.context.span_id, _describe(marker, by_id)
    start_activities = named("StartActivity:run_crew_task")
    for span in start_activities:
        assert span.parent.span_id == start.context.span_id, _describe(span, by_id)
    run_activities = named("RunActivity:run_crew_task")
    started_ids = {s.context.span_id for s in start_activities}
    for span in run_activities:
        assert span.parent.span_id in started_ids, _describe(span, by_id)
        assert span.kind is SpanKind.SERVER
    assert len(run_activities) >= len(start_activities)

    # The activity's SQL: the events it writes (a task that ends at once writes its start and
    # its end in one progress write, a longer one appends its end), as client spans inside
    # RunActivity.
    activity_ids = {s.context.span_id for s in run_activities}
    sql = [s for s in in_trace if s.attributes.get("db.system") == "postgresql"
           and any(a.context.span_id in activity_ids for a in _parent_chain(s, by_id))]
    appends = [s for s in sql if any(f in str(s.attributes.get("db.statement"))
                                     for f in ("append_run_events", "apply_progress_write"))]
    assert appends, sorted({_describe(s, by_id) for s in sql})
    assert all(s.kind is SpanKind.CLIENT and s.name == "SELECT" for s in appends)
    # Span names are SQL verbs, not the `--` comment every named query starts with, and the
    # pool's reset of each released connection makes no span.
    assert {s.name for s in sql} <= {"BEGIN", "COMMIT", "SELECT", "INSERT", "UPDATE"}, \
        sorted({s.name for s in sql})
    assert not [s for s in spans if "pg_advisory_unlock_all" in
                str(s.attributes.get("db.statement"))]

    # Every span descended from the request shares its trace id, and no Temporal span of this
    # run was orphaned into a trace of its own.
    for span in in_trace:
        assert span is server or server in _parent_chain(span, by_id), _describe(span, by_id)
    workflow_id = f"validation-{run_id}"
    for span in spans:
        if span.attributes.get("temporalWorkflowID") == workflow_id:
            assert span.context.trace_id == trace_id, _describe(span, by_id)



CONFIGURE = """
import asyncpg
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from waystation.settings import Settings
from waystation.telemetry import configure_tracing

assert configure_tracing(Settings(otel_exporter="none"), "x") is None
assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
assert not hasattr(asyncpg.connection.Connection.execute, "__wrapped__")

settings = Settings(otel_exporter="{exporter}")
provider = configure_tracing(settings, "waystation-test")
assert configure_tracing(settings, "again") is provider, "idempotent"
assert trace.get_tracer_provider() is provider
assert provider.resource.attributes["service.name"] == "waystation-test"
assert hasattr(asyncpg.connection.Connection.execute, "__wrapped__")
[processor] = provider._active_span_processor._span_processors
assert isinstance(processor, BatchSpanProcessor)
exporter = processor._batch_processor._exporter
assert isinstance(exporter, {exporter_class})
if isinstance(exporter, OTLPSpanExporter):
    assert exporter._endpoint == "http://collector.invalid:4318/v1/traces", exporter._endpoint
print("ok")
"""


@pytest.mark.parametrize("exporter,exporter_class", [
    ("console", "ConsoleSpanExporter"), ("otlp", "OTLPSpanExporter")])
def test_configure_tracing(exporter: str, exporter_class: str) -> None:
    """In a child process: the global provider can be set once per process."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.invalid:4318"}
    env.pop("OTEL_SERVICE_NAME", None)
    env.pop("WAYSTATION_OTEL_SERVICE_NAME", None)
    code = CONFIGURE.replace("{exporter}", exporter).replace("{exporter_class}", exporter_class)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
