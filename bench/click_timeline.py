"""Where a click's time goes: the clicked run's history and read model beside the click.

bench_human's `--timeline` prints, for the one person's clicks (out of the worker's cache and
in it), the median time from the click to each step the click sets off, all on the same
clock (this machine's wall clock, which the Temporal server, PostgreSQL and the benchmark
share): the Update's workflow task scheduled, started and completed in the run's history, the
Update accepted and completed, the next step's event row begun (`run_events.created_at`, its
transaction's start), the API's answer, and the next step's event seen on the SSE stream.
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.common import markdown_table


@dataclass
class Timed:
    """One click's wall-clock times (time.time()): sent, answered by the API, next step seen."""
    run_id: str
    sent: float
    answered: float
    seen: float


# The history events after the wait that a click's path crosses, by their name in the table.
STEPS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED: "workflow task scheduled",
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "workflow task started",
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow task completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "Update accepted",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED: "Update completed",
}


async def steps_of(temporal: Client, pool: asyncpg.Pool, timed: Timed) -> dict[str, float]:
    """Milliseconds from the click to each step (the n-th of a kind numbered from 2)."""
    async with pool.acquire() as conn:
        workflow_id = await conn.fetchval("SELECT workflow_id FROM runs WHERE id = $1::uuid",
                                          uuid.UUID(timed.run_id))
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    found: dict[str, float] = {}
    for event in history.events:
        at = event.event_time.seconds + event.event_time.nanos / 1e9
        if at < timed.sent or event.event_type not in STEPS:
            continue
        name, n = STEPS[event.event_type], 1
        while (label := name if n == 1 else f"{name} ({n})") in found:
            n += 1
        found[label] = (at - timed.sent) * 1000
    async with pool.acquire() as conn:
        committed = await conn.fetchval(
            "SELECT min(created_at) FROM run_events WHERE run_id = $1::uuid "
            "AND type NOT LIKE 'gate.%' AND created_at >= to_timestamp($2)",
            uuid.UUID(timed.run_id), timed.sent)
    if committed is not None:
        found["next step's event row begun"] = (committed.timestamp() - timed.sent) * 1000
    found["API answered"] = (timed.answered - timed.sent) * 1000
    found["next step seen on the stream"] = (timed.seen - timed.sent) * 1000
    return found


async def timeline(temporal: Client, pool: asyncpg.Pool,
                   clicks: dict[str, list[Timed]]) -> str:
    """A table: each step's median offset from the click, a column per group of clicks."""
    columns: dict[str, list[dict[str, float]]] = {}
    for group, runs in clicks.items():
        columns[group] = [await steps_of(temporal, pool, timed) for timed in runs]
    labels: list[str] = []
    for found in (f for steps in columns.values() for f in steps):
        labels += [label for label in found if label not in labels]
    labels.sort(key=lambda label: statistics.median(
        f[label] for steps in columns.values() for f in steps if label in f))
    rows = []
    for label in labels:
        cells = [label]
        for steps in columns.values():
            values = [f[label] for f in steps if label in f]
            cells.append(f"{statistics.median(values):.1f} ms (n={len(values)})"
                         if values else "")
        rows.append(cells)
    return markdown_table(["step, median from the click", *columns], rows,
                          [False] + [True] * len(columns))
