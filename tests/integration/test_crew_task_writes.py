"""A crew task's `task.started` is written with its `task.completed` when the task runs in
place and ends within `STARTED_WITHIN` (one statement, one transaction, instead of two);
a longer task in place, or a regular activity's, shows it has started before it ends."""

from __future__ import annotations

import asyncio
import dataclasses
from uuid import UUID

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from tests.helpers import new_validation_run
from waystation.activities.agents.base import AgentRequest, AgentResponse, ProgressReporter
from waystation.activities.agents.noop import NoopBackend
from waystation.activities.read_model import ReadModelActivities
from waystation.contracts.writes import EventWrite, ReadModelWrite
from waystation.kinds.validation.activities.crew_tasks import (
    STARTED_WITHIN,
    CrewTaskActivities,
    CrewTaskInput,
)

KEY = "p0.a1.founders_brief"


class SlowBackend(NoopBackend):
    """The noop backend's answer after `seconds`; notes whether the run's `task.started` was
    in the database while it worked."""

    def __init__(self, pool: asyncpg.Pool, run_id: UUID, seconds: float) -> None:
        self._pool, self._run_id, self._seconds = pool, run_id, seconds
        self.started_seen: bool | None = None

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        await asyncio.sleep(self._seconds)
        async with self._pool.acquire() as conn:
            self.started_seen = await conn.fetchval(
                "SELECT count(*) = 1 FROM run_events WHERE run_id = $1 AND event_key = $2",
                self._run_id, f"{KEY}:started")
        return await super().run(request, progress)


def _task(run_id: UUID, prelude: ReadModelWrite | None = None) -> CrewTaskInput:
    return CrewTaskInput(run_id=run_id, event_key=KEY, phase=0, crew="discovery",
                         task="founders_brief", agent="analyst", instructions="Brief.",
                         progress_pct_started=0, progress_pct_done=5, prelude=prelude)


async def _run(pool: asyncpg.Pool, backend: NoopBackend, task: CrewTaskInput, *,
               local: bool) -> None:
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, is_local=local)
    activities = CrewTaskActivities(pool, backend, ReadModelActivities(pool))
    await environment.run(activities.run_crew_task, task)


async def _events(pool: asyncpg.Pool, run_id: UUID) -> list[asyncpg.Record]:
    """The run's events in seq order, with the transaction that wrote each (xmin)."""
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT event_key, type, xmin::text AS tx FROM run_events "
                                "WHERE run_id = $1 ORDER BY seq", run_id)


async def test_a_task_in_place_ending_at_once_writes_its_events_and_prelude_in_one_transaction(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    prelude = ReadModelWrite(run_id=run_id, events=[EventWrite(
        event_key="p0.started", type="phase.started", phase=0, status="running")])
    await _run(pool, NoopBackend(), _task(run_id, prelude), local=True)
    events = await _events(pool, run_id)
    assert [e["type"] for e in events] == ["phase.started", "task.started", "task.completed"]
    assert len({e["tx"] for e in events}) == 1


async def test_a_longer_task_in_place_shows_it_has_started_before_it_ends(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    backend = SlowBackend(pool, run_id, STARTED_WITHIN.total_seconds() * 4)
    await _run(pool, backend, _task(run_id), local=True)
    assert backend.started_seen is True
    events = await _events(pool, run_id)
    assert [e["type"] for e in events] == ["task.started", "task.completed"]
    assert events[0]["tx"] != events[1]["tx"]


@pytest.mark.parametrize("seconds", [0.0, 0.01])
async def test_a_regular_activitys_task_writes_started_before_its_call(
        pool: asyncpg.Pool, seconds: float) -> None:
    run_id = (await new_validation_run(pool)).run_id
    backend = SlowBackend(pool, run_id, seconds)
    await _run(pool, backend, _task(run_id), local=False)
    assert backend.started_seen is True
    assert [e["type"] for e in await _events(pool, run_id)] == ["task.started", "task.completed"]


async def test_a_task_in_place_run_again_writes_each_event_once(pool: asyncpg.Pool) -> None:
    """A worker dying after the statement: the replayed task finds both rows."""
    run_id = (await new_validation_run(pool)).run_id
    for _ in range(2):
        await _run(pool, NoopBackend(), _task(run_id), local=True)
    assert [e["type"] for e in await _events(pool, run_id)] == ["task.started",
                                                                "task.completed"]
