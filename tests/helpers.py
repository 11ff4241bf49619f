"""Small helpers the tests share."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from waystation.activities.agents import AgentRequest, AgentResponse, backend_named
from waystation.activities.agents.base import (
    INVALID_OUTPUT,
    ModelCallFailed,
    ProgressReporter,
    Usage,
)
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationInput, ValidationRunInput
from waystation.persistence.runs import create_run, get_run
from waystation.settings import Settings
from waystation.testing import InProcessApi
from waystation.testing import eventually as eventually  # shared with plug-ins' tests
from waystation.worker import build_worker

IDEA = "An app that helps small clinics schedule patients and cut no-shows."


class FailingTasks:
    """The offline backend, except that each task named in `failing` fails for good once (an
    answer refused): the validation run then waits at its task_failed gate."""

    name = "failing-tasks"

    def __init__(self, failing: set[str] | None = None) -> None:
        self.failing = failing or set()
        self._offline = backend_named("offline")

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        if request.task in self.failing:
            self.failing.discard(request.task)
            raise ModelCallFailed(f"{request.task}: the answer is invalid (scripted)",
                                  type=INVALID_OUTPUT, usage=Usage(), non_retryable=True)
        return await self._offline.run(request, progress)

    async def aclose(self) -> None:
        await self._offline.aclose()


async def new_validation_run(pool: asyncpg.Pool, owner: str = "alice",
                             group_id: uuid.UUID | None = None,
                             **input_fields: Any) -> ValidationRunInput:
    run_id = uuid.uuid4()
    run_input = ValidationInput(entrepreneur_input=IDEA, **input_fields)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner=owner, group_id=group_id,
                         workflow_id=VALIDATION.workflow_id(run_id), idempotency_key=None,
                         input=run_input.model_dump(mode="json"))
    return ValidationRunInput(run_id=run_id, owner=owner, input=run_input)


async def wait_gate(pool: asyncpg.Pool, run_id: uuid.UUID, checkpoint: str, *,
                    timeout: float = 30.0) -> None:  # noqa: ASYNC109
    """Until the read model shows the run waiting at `checkpoint`."""
    async def pending() -> bool:
        async with pool.acquire() as conn:
            run = await get_run(conn, run_id)
        return run is not None and run.hitl_state == checkpoint
    await eventually(pending, timeout=timeout)


@asynccontextmanager
async def live_api(migrated_url: str, dev_env: WorkflowEnvironment, pool: asyncpg.Pool,
                   task_queue: str, *, secret: str, delay_ms: int = 0,
                   **settings: Any) -> AsyncIterator[InProcessApi]:
    """The real app under uvicorn and a worker with the offline backend, on the dev server."""
    config = Settings(database_url=migrated_url, jwt_secret=secret,
                      temporal_task_queue=task_queue,
                      temporal_address=dev_env.client.service_client.config.target_host,
                      **settings)
    api = InProcessApi(config)
    await api.start()
    try:
        async with build_worker(dev_env.client, pool, task_queue=task_queue,
                                backend=backend_named("offline", delay_ms=delay_ms),
                                webhook_private_networks=config.webhooks_to_private_networks):
            yield api
    finally:
        await api.stop()


async def started_workflow(handle: WorkflowHandle[Any, Any], timeout: float = 30) -> None:  # noqa: ASYNC109
    """Wait until the workflow exists: one the recorder starts after a write the test saw
    (a notification's, once its first attempt is recorded) may not exist yet."""
    async def started() -> bool:
        try:
            await handle.describe()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True
    await eventually(started, timeout=timeout)
