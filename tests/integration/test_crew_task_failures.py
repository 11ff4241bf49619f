"""A crew task's failed attempts are each written once, with their usage, in place too.

A local activity's attempt numbers reach the history only with its workflow task: after a
worker dies during a crew task run in place, the next worker numbers its attempts from 1
again. Each of those failures cost what its usage says, so each must be written, and a write
repeated within one attempt must still be written once.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from tests.helpers import new_validation_run
from waystation.activities.agents.base import AgentRequest, AgentResponse, ModelCallFailed, Usage
from waystation.activities.read_model import ReadModelActivities
from waystation.kinds.validation.activities.crew_tasks import CrewTaskActivities, CrewTaskInput

SCHEDULED = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)


class FailingBackend:
    """Every request fails after spending a cent."""

    name = "failing"

    async def run(self, request: AgentRequest, progress: object = None) -> AgentResponse:
        raise ModelCallFailed(f"{request.task}: the model is down", type="model_error",
                              usage=Usage(input_tokens=10, output_tokens=0, cost_usd=0.01))

    async def aclose(self) -> None:
        pass


async def _attempt(pool: asyncpg.Pool, task: CrewTaskInput, *, local: bool, attempt: int,
                   scheduled: datetime) -> None:
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, is_local=local, attempt=attempt, scheduled_time=SCHEDULED,
        current_attempt_scheduled_time=scheduled)
    activities = CrewTaskActivities(pool, FailingBackend(), ReadModelActivities(pool))
    with pytest.raises(ModelCallFailed):
        await environment.run(activities.run_crew_task, task)


async def _failures(pool: asyncpg.Pool, task: CrewTaskInput) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            "SELECT event_key, output FROM run_events WHERE run_id = $1 AND type = 'task.failed'"
            " ORDER BY seq", task.run_id)


def _task(run_id: UUID, event_key: str = "p0.a1.t0") -> CrewTaskInput:
    return CrewTaskInput(run_id=run_id, event_key=event_key, phase=0, crew="discovery",
                         task="founders_brief", agent="analyst", instructions="Brief.",
                         progress_pct_started=0, progress_pct_done=5)


async def test_a_local_attempt_numbered_again_after_a_crash_is_written(pool: asyncpg.Pool) -> None:
    task = _task((await new_validation_run(pool)).run_id)
    await _attempt(pool, task, local=True, attempt=1, scheduled=SCHEDULED)
    # The worker died; the next one runs the task again, from attempt 1.
    await _attempt(pool, task, local=True, attempt=1, scheduled=SCHEDULED + timedelta(seconds=30))
    failures = await _failures(pool, task)
    assert len(failures) == 2
    assert len({f["event_key"] for f in failures}) == 2


@pytest.mark.parametrize("local", [True, False], ids=["in place", "regular activity"])
async def test_one_attempt_written_twice_is_one_failure(pool: asyncpg.Pool, local: bool) -> None:
    task = _task((await new_validation_run(pool)).run_id)
    for _ in range(2):
        await _attempt(pool, task, local=local, attempt=1, scheduled=SCHEDULED)
    assert len(await _failures(pool, task)) == 1
