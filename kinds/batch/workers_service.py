"""The workers view (issue 29, seed 004): each worker process polling Waystation's task queue,
from Temporal's description of that queue, joined with the items it ran (work_units.worker_id,
the worker's Temporal identity, written by the batch activities).

Any signed-in user sees every worker's status, last poll and totals (counts and time, never
an item): how busy the workers are is no one's secret. The items running on a worker are
listed only when the caller may read their run (row-level security, then `may_read`); the
service role sees them all.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

import asyncpg
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from waystation.kinds.batch import workers_repository as workers_repo
from waystation.kinds.batch.workers_schemas import WorkerItem, WorkerStatus, WorkersView, WorkerView
from waystation.sdk.reads import get_run
from waystation.sdk.services import User, may_read

# Temporal lists a poller for five minutes after its last poll, and an idle worker's long
# poll lasts up to about a minute: one not seen for two is gone.
GONE_AFTER = timedelta(minutes=2)
_TYPES: dict[Literal["workflow", "activity"], TaskQueueType.ValueType] = {
    "workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
}


@dataclass
class _Poller:
    last_poll: datetime | None = None
    polls: list[Literal["workflow", "activity"]] = field(default_factory=list)


@dataclass
class _Everyones:
    """What every caller sees alike: the queue's pollers and each worker's totals."""

    pollers: dict[str, _Poller]
    totals: dict[str, workers_repo.WorkerTotals]
    read_at: float


class EveryonesCache:
    """The part of the view that is the same for every caller (two Temporal calls and a count
    over every item), read at most once per `max_age_seconds` per task queue and process,
    however many consoles poll: one reader at a time refreshes it, the others wait for it."""

    def __init__(self) -> None:
        self._read: dict[str, _Everyones] = {}
        self._lock = asyncio.Lock()
        self.reads = 0  # how often it was read (the cost the cache saves)

    async def get(self, conn: asyncpg.Connection, temporal: Client, task_queue: str, *,
                  max_age_seconds: float) -> _Everyones:
        async with self._lock:
            read = self._read.get(task_queue)
            if read is None or time.monotonic() - read.read_at >= max_age_seconds:
                pollers = await _pollers(temporal, task_queue)
                totals = await workers_repo.unit_totals(conn, list(pollers))
                read = self._read[task_queue] = _Everyones(
                    pollers=pollers, totals={t.worker_id: t for t in totals},
                    read_at=time.monotonic())
                self.reads += 1
            return read


EVERYONES = EveryonesCache()


async def list_workers(conn: asyncpg.Connection, temporal: Client, user: User,
                       task_queue: str, *, max_age_seconds: float = 0.0) -> WorkersView:
    """Every worker polling `task_queue`, and every worker with items still running on it
    (one that died with items in flight shows as gone until they are retried elsewhere).
    Pollers and totals may be up to `max_age_seconds` old (EveryonesCache); the items listed
    are read for the caller."""
    everyones = await EVERYONES.get(conn, temporal, task_queue, max_age_seconds=max_age_seconds)
    pollers, totals = everyones.pollers, everyones.totals
    worker_ids = sorted(set(pollers) | set(totals))
    running: dict[str, list[WorkerItem]] = {w: [] for w in worker_ids}
    readable: dict[UUID, bool] = {}
    for unit in await workers_repo.running_units(conn, worker_ids):
        if unit.run_id not in readable:
            run = await get_run(conn, unit.run_id)
            readable[unit.run_id] = run is not None and await may_read(conn, user, run)
        if readable[unit.run_id]:
            running[unit.worker_id].append(WorkerItem(
                item_id=unit.unit_id, job_id=unit.job_id, run_id=unit.run_id,
                ordinal=unit.ordinal, assigned_at=unit.assigned_at, started_at=unit.started_at))
    now = datetime.now(UTC)
    workers = []
    for worker_id in worker_ids:
        poller, total = pollers.get(worker_id, _Poller()), totals.get(worker_id)
        in_flight = total.running if total else 0
        workers.append(WorkerView(
            worker_id=worker_id, status=worker_status(poller.last_poll, in_flight, now),
            last_heartbeat=poller.last_poll, polls=poller.polls, running=in_flight,
            current_items=running[worker_id],
            units_completed=total.completed if total else 0,
            units_failed=total.failed if total else 0,
            total_execution_seconds=(total.execution_ms if total else 0) / 1000,
            last_assigned_at=total.last_assigned_at if total else None))
    order = {"active": 0, "idle": 1, "gone": 2}
    workers.sort(key=lambda w: (order[w.status], w.worker_id))
    return WorkersView(task_queue=task_queue,
                       gone_after_seconds=int(GONE_AFTER.total_seconds()), workers=workers)


def worker_status(last_poll: datetime | None, running: int, now: datetime) -> WorkerStatus:
    """Gone once not heard from for GONE_AFTER (whatever items are marked running on it);
    else active with items running, idle without."""
    if last_poll is None or now - last_poll > GONE_AFTER:
        return "gone"
    return "active" if running > 0 else "idle"


async def _pollers(temporal: Client, task_queue: str) -> dict[str, _Poller]:
    """The queue's pollers by identity, workflow and activity pollers merged: one worker
    process polls both with the same identity."""
    pollers: dict[str, _Poller] = {}
    for kind, queue_type in _TYPES.items():
        described = await temporal.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(namespace=temporal.namespace,
                                     task_queue=TaskQueue(name=task_queue),
                                     task_queue_type=queue_type))
        for info in described.pollers:
            poller = pollers.setdefault(info.identity, _Poller())
            poller.polls.append(kind)
            if info.HasField("last_access_time"):
                seen = info.last_access_time.ToDatetime(tzinfo=UTC)
                poller.last_poll = max(poller.last_poll or seen, seen)
    return pollers
