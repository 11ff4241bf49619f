"""Helpers shared by the batch-job tests and the history recorder."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from waystation.activities.agents import AgentRequest, AgentResponse
from waystation.activities.agents.base import ProgressReporter
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.models import BatchInput, BatchRunInput
from waystation.persistence.runs import create_run


async def new_batch_run(pool: asyncpg.Pool, owner: str = "alice", *, round_size: int = 1000,
                        history_budget: int | None = None,
                        **input_fields: Any) -> BatchRunInput:
    run_id = uuid.uuid4()
    job = BatchInput(**{"name": "test job", **input_fields})
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="batch", owner=owner, group_id=None,
                         workflow_id=BATCH.workflow_id(run_id), idempotency_key=None,
                         input=job.model_dump(mode="json"))
    budget = {} if history_budget is None else {"history_budget": history_budget}
    return BatchRunInput(run_id=run_id, owner=owner, spec=job.spec(), round_size=round_size,
                         **budget)


Rule = Callable[[AgentRequest, int], dict[str, Any]]


class ScriptedBackend:
    """Answers by a rule of (request, how often this task and prompt was asked); records all."""

    name = "scripted"

    def __init__(self, rule: Rule | None = None, *, delay: float = 0.0) -> None:
        self.rule = rule or (lambda request, n: {"text": f"{request.task}: {request.instructions}"})
        self.delay = delay
        self.requests: list[AgentRequest] = []
        self.calls: dict[tuple[str, str], int] = {}
        self.running = self.most_running = 0

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        self.requests.append(request)
        key = (request.task, str(request.item_id))
        self.calls[key] = self.calls.get(key, 0) + 1
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.delay:
                # The scripted backend's latency: a stand-in for a slow model, not a wait.
                await asyncio.sleep(self.delay)
            output = self.rule(request, self.calls[key])
        finally:
            self.running -= 1
        return AgentResponse(output=output, input_tokens=len(request.instructions) // 4,
                             output_tokens=5, cost_usd=0.001, model="scripted")


async def chain(client: Client, handle: WorkflowHandle) -> list[WorkflowHistory]:
    """The history of every run of a job, following continue-as-new from the first."""
    histories: list[WorkflowHistory] = []
    run_id: str | None = handle.first_execution_run_id
    while run_id:
        histories.append(history := await client.get_workflow_handle(
            handle.id, run_id=run_id).fetch_history())
        run_id = None
        for event in history.events:
            if event.HasField("workflow_execution_continued_as_new_event_attributes"):
                run_id = event.workflow_execution_continued_as_new_event_attributes \
                    .new_execution_run_id
    return histories


async def activity_counts(client: Client, handle: WorkflowHandle) -> dict[str, int]:
    """How many activities of each type a job scheduled, over every run of its chain."""
    counts: dict[str, int] = {}
    for history in await chain(client, handle):
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                counts[name] = counts.get(name, 0) + 1
    return counts


def carried_work(history: WorkflowHistory) -> dict[str, Any]:
    """The queued ranges and retries a run handed to the next one when it continued as new."""
    for event in history.events:
        if event.HasField("workflow_execution_continued_as_new_event_attributes"):
            payload = event.workflow_execution_continued_as_new_event_attributes.input.payloads[0]
            progress = json.loads(payload.data)["progress"]
            return {"ranges": progress["ranges"], "retries": progress["retries"]}
    return {"ranges": [], "retries": []}
