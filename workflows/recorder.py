"""Writes a run's read model from inside a workflow: one recorder for every run kind.

Every write is a local activity: it is short, and it is persisted with the workflow task that
follows it, so a crash before then re-runs it; the writes are idempotent for exactly that reason
(see persistence.writes). Event keys and snapshot ordinals are derived from workflow state,
so a replay produces the same keys.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.read_model import ReadModelActivities
    from persistence.writes import (
        EventWrite,
        GateCloseWrite,
        GateOpenWrite,
        ReadModelWrite,
        RunStateWrite,
        SnapshotWrite,
    )

RECORD_TIMEOUT = timedelta(seconds=30)
# The database may be down for a while (restart, failover): keep trying, slowly.
RECORD_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                           maximum_interval=timedelta(seconds=10))


class RunRecorder:
    def __init__(self, run_id: UUID) -> None:
        self.run_id = run_id
        self._snapshots = 0

    def event(self, key: str, type: str, **fields: Any) -> EventWrite:
        return EventWrite(event_key=key, type=type, **fields)

    async def write(
        self,
        *,
        events: list[EventWrite] | None = None,
        run: RunStateWrite | None = None,
        snapshot: tuple[str, int | None, dict[str, Any]] | None = None,
        open_gate: GateOpenWrite | None = None,
        close_gate: GateCloseWrite | None = None,
    ) -> None:
        snapshot_write = None
        if snapshot is not None:
            self._snapshots += 1
            label, phase, state = snapshot
            snapshot_write = SnapshotWrite(step_ordinal=self._snapshots, label=label, phase=phase,
                                           state=state)
        await workflow.execute_local_activity_method(
            ReadModelActivities.record,
            ReadModelWrite(run_id=self.run_id, events=events or [], run=run,
                           snapshot=snapshot_write, open_gate=open_gate, close_gate=close_gate),
            start_to_close_timeout=RECORD_TIMEOUT,
            retry_policy=RECORD_RETRY,
            summary=_summary(events, run, open_gate, close_gate),
        )


def _summary(events: list[EventWrite] | None, run: RunStateWrite | None,
             open_gate: GateOpenWrite | None, close_gate: GateCloseWrite | None) -> str:
    if open_gate:
        return f"open gate {open_gate.checkpoint_name}"
    if close_gate:
        return f"close gate ({close_gate.status})"
    if events:
        return f"record {events[0].type}"
    return f"record status {run.status}" if run else "record"
