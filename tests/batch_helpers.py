"""Helpers shared by the batch-job tests and the history recorder."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from activities.agents import AgentRequest, AgentResponse
from activities.agents.base import ProgressReporter
from persistence.runs import create_run
from workflows.batch import batch_workflow_id
from workflows.batch_models import BatchInput, BatchRunInput


async def new_batch_run(pool: asyncpg.Pool, owner: str = "alice", *, round_size: int = 1000,
                        **input_fields: Any) -> BatchRunInput:
    run_id = uuid.uuid4()
    job = BatchInput(**{"name": "test job", **input_fields})
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="batch", owner=owner, group_id=None,
                         workflow_id=batch_workflow_id(run_id), idempotency_key=None,
                         input=job.model_dump(mode="json"))
    return BatchRunInput(run_id=run_id, owner=owner, spec=job.spec(), round_size=round_size)


Rule = Callable[[AgentRequest, int], dict[str, Any]]


class ScriptedBackend:
    """Answers by a rule of (request, how often this task and prompt was asked); records all."""

    name = "scripted"

    def __init__(self, rule: Rule | None = None, *, delay: float = 0.0) -> None:
        self.rule = rule or (lambda request, n: {"text": f"{request.task}: {request.instructions}"})
        self.delay = delay
        self.requests: list[AgentRequest] = []
        self.calls: dict[tuple[str, str], int] = {}

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        self.requests.append(request)
        key = (request.task, str(request.context.get("item_id")))
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.delay:
            await asyncio.sleep(self.delay)
        output = self.rule(request, self.calls[key])
        return AgentResponse(output=output, input_tokens=len(request.instructions) // 4,
                             output_tokens=5, cost_usd=0.001, model="scripted")
