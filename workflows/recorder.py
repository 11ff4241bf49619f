"""Writes a run's read model from inside a workflow: one recorder for every run kind.

Writes that need not be visible at once (a phase starting or completing, its snapshot) are
*staged* and travel with the next write that must happen anyway: the first event of the next
crew task (applied by that activity in the same transaction) or the next local activity. That
spends one Temporal round trip where there would be three. Everything the recorder writes is
idempotent (see waystation.persistence.writes), so a retried activity or a replay may apply it
again. Event keys and snapshot ordinals come from workflow state, so a replay produces the same
keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from waystation.activities.read_model import ReadModelActivities
    from waystation.contracts.writes import (
        DelegationWrite,
        EventWrite,
        GateCloseWrite,
        GateNoticeWrite,
        GateOpenWrite,
        ReadModelWrite,
        RunEnd,
        RunStateWrite,
        SnapshotWrite,
        VoteWrite,
        merge_writes,
    )

RECORD_TIMEOUT = timedelta(seconds=30)
# The database may be down for a while (restart, failover): keep trying, slowly.
RECORD_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                           maximum_interval=timedelta(seconds=10))

Snapshot = tuple[str, int | None, dict[str, Any]]
T = TypeVar("T")


class RunRecorder:
    def __init__(self, run_id: UUID, *, snapshots_taken: int = 0) -> None:
        self.run_id = run_id
        # A run that continued as new carries its count on, so ordinals never repeat.
        self._snapshots = snapshots_taken
        self._staged: ReadModelWrite | None = None
        # Called once what is staged now has been written (see `stage`'s `on_written`).
        self._on_written: list[Callable[[], None]] = []
        # Awaited before each write's local activity (the gates': see GatedWorkflow).
        self.before_write: Callable[[], Awaitable[None]] | None = None

    @property
    def snapshots_taken(self) -> int:
        return self._snapshots

    def event(self, key: str, type: str, **fields: Any) -> EventWrite:
        return EventWrite(event_key=key, type=type, **fields)

    def _build(self, events: list[EventWrite] | None, run: RunStateWrite | None,
               snapshot: Snapshot | None, **gate_parts: Any) -> ReadModelWrite:
        snapshots = []
        if snapshot is not None:
            self._snapshots += 1
            label, phase, state = snapshot
            snapshots.append(SnapshotWrite(step_ordinal=self._snapshots, label=label,
                                           phase=phase, state=state))
        return ReadModelWrite(run_id=self.run_id, events=events or [], run=run,
                              snapshots=snapshots, **gate_parts)

    def stage(self, *, events: list[EventWrite] | None = None, run: RunStateWrite | None = None,
              snapshot: Snapshot | None = None, close_gate: GateCloseWrite | None = None,
              votes: list[VoteWrite] | None = None,
              on_written: Callable[[], None] | None = None) -> None:
        """Queue a write to go out with the next one; `on_written` is called once it has."""
        write = self._build(events, run, snapshot, close_gate=close_gate, votes=votes or [])
        self._staged = merge_writes(self._staged, write) if self._staged else write
        if on_written is not None:
            self._on_written.append(on_written)

    @property
    def awaited(self) -> bool:
        """Whether something waits for what is staged to be written."""
        return bool(self._on_written)

    def take_staged(self) -> ReadModelWrite | None:
        """Hand the queued write to an activity that applies it with its own first write.

        The workflow cannot see when the activity has applied it, so whoever waits for it
        counts it as written once handed over."""
        staged, callbacks = self._take()
        for written in callbacks:
            written()
        return staged

    async def hand_over(self, local: Callable[[ReadModelWrite | None], Awaitable[T]]) -> T:
        """Run `local`, a local activity given what is staged to apply with its own first
        write (a validation crew task run in place), as `write` runs its own: after
        `before_write`, and whoever waits for the staged write is told once `local` has
        returned. Unlike `take_staged`'s regular activity, which a worker may start much
        later, this one is done within the workflow task, so a decision staged with
        `ask_human(record_with_next=True)` may wait for it."""
        if self.before_write is not None:
            await self.before_write()
        staged, callbacks = self._take()
        try:
            result = await local(staged)
        except BaseException:
            self._restage(staged, callbacks)
            raise
        for written in callbacks:
            written()
        return result

    def _restage(self, staged: ReadModelWrite | None,
                 callbacks: list[Callable[[], None]]) -> None:
        """Stage again a write that is not known to be done, when something waits for it
        (the run was canceled meanwhile, or the task in place failed): it goes out again with
        the next write (the task_failed gate's, or the run's last)."""
        if staged is not None and callbacks:
            self._staged = merge_writes(staged, self._staged) if self._staged else staged
            self._on_written = callbacks + self._on_written

    def _take(self) -> tuple[ReadModelWrite | None, list[Callable[[], None]]]:
        """What is staged, and who waits for it; both left empty."""
        taken = self._staged, self._on_written
        self._staged, self._on_written = None, []
        return taken

    async def write(
        self,
        *,
        events: list[EventWrite] | None = None,
        run: RunStateWrite | None = None,
        snapshot: Snapshot | None = None,
        open_gate: GateOpenWrite | None = None,
        close_gate: GateCloseWrite | None = None,
        votes: list[VoteWrite] | None = None,
        delegation: DelegationWrite | None = None,
        gate_notice: GateNoticeWrite | None = None,
    ) -> RunEnd | None:
        """Write now (with anything staged), as a local activity: short, and persisted with
        the workflow task that follows it, so a crash before then simply re-runs it. A write
        ending the run returns the end it found instead, if the run had already ended."""
        if self.before_write is not None:
            await self.before_write()
        write = self._build(events, run, snapshot, open_gate=open_gate, close_gate=close_gate,
                            votes=votes or [], delegation=delegation, gate_notice=gate_notice)
        staged, callbacks = self._take()
        if staged is not None:
            write = merge_writes(staged, write)
        try:
            result = await workflow.execute_local_activity_method(
                ReadModelActivities.record, write,
                start_to_close_timeout=RECORD_TIMEOUT, retry_policy=RECORD_RETRY,
                summary=_summary(write))
        except BaseException:
            self._restage(staged, callbacks)
            raise
        for written in callbacks:
            written()
        return result.ended


def _summary(write: ReadModelWrite) -> str:
    if write.open_gate:
        return f"open gate {write.open_gate.checkpoint_name}"
    if write.close_gate:
        return f"close gate ({write.close_gate.status})"
    if write.votes:
        return f"record vote of {write.votes[0].voter}"
    if write.delegation:
        return f"record delegation to {write.delegation.to_user}"
    if write.gate_notice:
        return f"record gate {write.gate_notice.kind}"
    if write.events:
        return f"record {write.events[-1].type}"
    return f"record status {write.run.status}" if write.run else "record"
