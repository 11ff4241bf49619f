"""The Temporal worker: every workflow and activity of Waystation on one task queue."""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import timedelta
from pathlib import Path

import asyncpg
from temporalio.client import Client
from temporalio.worker import Worker

from activities.agents import AgentBackend, backend_named
from activities.batch.items import BatchActivities
from activities.crew_tasks import CrewTaskActivities
from activities.mobile.artifacts import LocalArtifactStore
from activities.mobile.steps import MobileActivities
from activities.read_model import ReadModelActivities
from persistence.db import create_pool
from waystation.database import resolve_database_url
from waystation.settings import Settings
from waystation.telemetry import configure_tracing
from waystation.temporal_client import connect_temporal
from workflows.batch import BatchJob
from workflows.mobile import MobileAgentRun
from workflows.validation import ValidationRun

log = logging.getLogger(__name__)

WORKFLOWS = [ValidationRun, MobileAgentRun, BatchJob]


def build_worker(
    client: Client, pool: asyncpg.Pool, *, task_queue: str, backend: AgentBackend,
    max_cached_workflows: int = 1000,
    sticky_queue_schedule_to_start_timeout: timedelta = timedelta(seconds=10),
    artifact_dir: Path | None = None,
) -> Worker:
    crew = CrewTaskActivities(pool, backend)
    read_model = ReadModelActivities(pool)
    batch = BatchActivities(pool, backend)
    mobile = MobileActivities(pool, LocalArtifactStore(artifact_dir) if artifact_dir else None)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[crew.run_crew_task, read_model.record, batch.prepare_job, batch.run_slice,
                    batch.run_item, mobile.explore_step],
        max_cached_workflows=max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=sticky_queue_schedule_to_start_timeout,
    )


def agent_backend(settings: Settings) -> AgentBackend:
    return backend_named(settings.agent_backend, delay_ms=settings.offline_delay_ms,
                         base_url=settings.openai_base_url, api_key=settings.openai_api_key,
                         model=settings.openai_model, prices=settings.model_prices,
                         timeout_seconds=settings.openai_timeout_seconds)


async def run_worker(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM, then finish in-flight tasks and stop."""
    # Before the client: its TracingInterceptor and the pool's queries use this provider.
    configure_tracing(settings, "waystation-worker")
    client = await connect_temporal(settings)
    pool = await create_pool(resolve_database_url(settings))
    backend = agent_backend(settings)
    worker = build_worker(client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend,
                          max_cached_workflows=settings.worker_max_cached_workflows,
                          artifact_dir=settings.artifact_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling task queue %s", settings.temporal_task_queue)
    async with worker:
        await stop.wait()
    await backend.aclose()
    await pool.close()
