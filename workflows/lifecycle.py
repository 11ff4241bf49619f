"""One run lifecycle for every run kind: status, search attributes, start and end events.

A run kind's workflow inherits `RunWorkflow`, calls `init_run` in its `__init__`, wraps its
loop in `lifecycle(...)` and ends it with `complete(...)` or `fail(...)`. The base keeps the
`runs` row, the Web UI's search attributes and current details, the shared event vocabulary
(`run.started`, `run.completed` / `run.failed` / `run.canceled`, each with a stop reason),
cancellation, and waiting for unfinished handlers. A kind keeps only its own loop and state,
and tells the base where it is (`position`) and what its snapshots hold (`kind_state`).

Replay note: every method here issues its Temporal commands (a search-attribute upsert, then
one local activity) in the order the three built-in kinds issued them before they shared this
code, so their recorded histories replay unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar, cast, get_type_hints
from uuid import UUID

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from waystation.contracts import events as ev
    from waystation.contracts.statuses import (
        STOP_ACTIVITY_FAILED,
        STOP_CANCELED,
        STOP_COMPLETED,
        RunStatus,
    )
    from waystation.contracts.writes import EventWrite, RunEnd, RunStateWrite
    from waystation.workflows import search_attributes as sa
    from waystation.workflows.gate_handlers import GatedWorkflow
    from waystation.workflows.recorder import RunRecorder

R = TypeVar("R")
RUN_FAILED_ERROR = "RunFailed"


class RunLife(BaseModel):
    """Where a run is in its life; every snapshot carries it."""

    status: RunStatus = "running"
    waiting_on: str | None = None
    error_message: str | None = None
    stop_reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class RunWorkflow(GatedWorkflow):
    """The base of every run kind's workflow (built-in or plug-in)."""

    _life: RunLife
    _visible: tuple[Any, ...] | None

    def init_run(self, run_id: UUID, *, snapshots_taken: int = 0,
                 status: RunStatus = "running") -> None:
        """Call from `__init__`; `snapshots_taken` carries over a continue-as-new."""
        self._init_gates(RunRecorder(run_id, snapshots_taken=snapshots_taken))
        self._life = RunLife(status=status)
        self._visible = None

    @property
    def run_id(self) -> UUID:
        return self._recorder.run_id

    @property
    def life(self) -> RunLife:
        return self._life

    # --- what a kind tells the base -------------------------------------------------------

    def position(self) -> tuple[int, str | None]:
        """(current_phase, phase_name) as the `runs` row shows them."""
        return 0, None

    def kind_state(self) -> dict[str, Any]:
        """The kind's own state, for snapshots."""
        return {}

    def progress_pct(self) -> int | None:
        return None

    def search_attribute_updates(self) -> list[SearchAttributeUpdate[Any]]:
        life = self._life
        return [sa.STATUS.value_set(life.status),
                sa.AWAITING_HUMAN.value_set(life.waiting_on is not None)]

    # --- recording ------------------------------------------------------------------------

    def event(self, key: str, type: str, **fields: Any) -> EventWrite:
        """An event of this run; `key` makes its write idempotent, so derive it from state."""
        return self._recorder.event(key, type, **fields)

    def stage(self, *, events: list[EventWrite] | None = None, snapshot: str | None = None,
              with_state: bool = False, on_written: Callable[[], None] | None = None) -> None:
        """Queue events (and a snapshot labelled `snapshot`) to go out with the next write;
        `on_written` is called once that write is done (a handler waiting for it)."""
        self._recorder.stage(events=events, run=self._run_state() if with_state else None,
                             snapshot=self._snapshot(snapshot) if snapshot else None,
                             on_written=on_written)

    async def record(self, *, events: list[EventWrite] | None = None,
                     snapshot: str | None = None, with_state: bool = False) -> None:
        """Write events (and a snapshot) now, with anything staged, as one local activity."""
        await self._recorder.write(events=events,
                                   run=self._run_state() if with_state else None,
                                   snapshot=self._snapshot(snapshot) if snapshot else None)

    def show(self, details: str) -> None:
        """The Web UI's current details."""
        workflow.set_current_details(details)

    def snapshot_state(self) -> dict[str, Any]:
        return {**self.kind_state(), **self._life.model_dump(mode="json")}

    def _snapshot(self, label: str) -> tuple[str, int | None, dict[str, Any]]:
        return label, self.position()[0], self.snapshot_state()

    # --- the life -------------------------------------------------------------------------

    async def lifecycle(self, body: Callable[[], Awaitable[R]]) -> R:
        """Run the kind's loop; a cancel is recorded as `canceled`, an activity that gives up
        as `failed` (stop reason `activity_failed`)."""
        try:
            return await body()
        except asyncio.CancelledError:
            return await self._end_canceled(body)
        except ActivityError as error:
            if is_cancelled_exception(error):
                return await self._end_canceled(body)
            cause = getattr(error.cause, "message", None) or str(error)
            await self.fail(f"{error.activity_type or 'activity'} failed: {cause}",
                            stop_reason=STOP_ACTIVITY_FAILED)

    async def _end_canceled(self, body: Callable[[], Awaitable[R]]) -> R:
        """Record the cancel and raise it, unless the run had already ended.

        A cancel that reaches the workflow while its last local activities run lets their
        writes commit (`run.completed` or `run.failed`), then Temporal refuses the worker's
        completion for the cancel, and the replay meets the cancel first. The read model keeps
        the end it has (migration 028), and the workflow ends the same way: completed with
        the recorded result, or failed with the recorded message, so the Web UI, the API and
        `handle.result()` tell one story."""
        ended = await self._record_cancel()
        if ended is None or ended.status == "canceled":
            raise asyncio.CancelledError()
        life = self._life
        life.status, life.stop_reason, life.finished_at = \
            ended.status, ended.stop_reason, workflow.now()
        life.error_message = ended.error_message
        self._upsert_visible()
        if ended.status == "failed":
            self._end_failed(ended.error_message or "failed")
        self.show("completed")
        return _recorded_result(body, ended.result)

    def stage_start(self, **output: Any) -> None:
        """`run.started`, staged to travel with the run's first write."""
        self._life.started_at = workflow.now()
        self._recorder.stage(
            events=[self.event(ev.RUN_STARTED, ev.RUN_STARTED, status="running",
                               progress_pct=0, output=output or None)],
            run=self._run_state())

    async def complete(self, result: BaseModel, *, stop_reason: str = STOP_COMPLETED,
                       details: str = "completed", **output: Any) -> None:
        """Record `run.completed` once every handler has finished; return `result` after."""
        if self._recorder.awaited:  # a handler (a decision's, a message's) waits for it
            await self._recorder.write()
        await workflow.wait_condition(workflow.all_handlers_finished)
        life = self._life
        life.status, life.stop_reason, life.finished_at = "completed", stop_reason, workflow.now()
        await self._recorder.write(
            events=[self.event(ev.RUN_COMPLETED, ev.RUN_COMPLETED, status="completed",
                               progress_pct=100, output={"stop_reason": stop_reason, **output})],
            run=self._run_state(result=result.model_dump(mode="json")),
            snapshot=self._snapshot("completed"))
        self.show(details)

    async def fail(self, message: str, *, stop_reason: str,
                   result: BaseModel | None = None) -> NoReturn:
        """Record `run.failed` and end the run with a non-retryable error."""
        life = self._life
        life.status, life.error_message, life.stop_reason = "failed", message, stop_reason
        life.waiting_on, life.finished_at = None, workflow.now()
        await self._recorder.write(
            events=[self.event(ev.RUN_FAILED, ev.RUN_FAILED, status="failed",
                               error_message=message, progress_pct=self.progress_pct(),
                               output={"stop_reason": stop_reason})],
            run=self._run_state(result=result.model_dump(mode="json") if result else None),
            snapshot=self._snapshot("failed"))
        self._end_failed(message)

    def _end_failed(self, message: str) -> NoReturn:
        self.show(f"failed · {message}")
        raise ApplicationError(message, type=RUN_FAILED_ERROR, non_retryable=True)

    async def _record_cancel(self) -> RunEnd | None:
        """Record `run.canceled`; the run's end if it had already ended (nothing written)."""
        await self.close_open_gate("superseded")
        life = self._life
        life.status, life.waiting_on, life.stop_reason = "canceled", None, STOP_CANCELED
        life.finished_at = workflow.now()
        ended = await self._recorder.write(
            events=[self.event(ev.RUN_CANCELED, ev.RUN_CANCELED, status="canceled",
                               progress_pct=self.progress_pct(),
                               output={"stop_reason": STOP_CANCELED})],
            run=self._run_state(), snapshot=self._snapshot("canceled"))
        self.show("canceled")
        return ended

    async def continue_as_new(self, next_input: Callable[[int], BaseModel], *,
                              task_timeout: timedelta | None = None) -> NoReturn:
        """Flush what is staged (it lives in this run's memory only), let handlers finish,
        and continue as new with `next_input(snapshots_taken)`."""
        await self._recorder.write()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(next_input(self._recorder.snapshots_taken),
                                 task_timeout=task_timeout)

    # --- hooks of the gate mechanism ------------------------------------------------------

    def _set_gate_state(self, waiting_on: str | None, status: RunStatus) -> None:
        self._life.waiting_on, self._life.status = waiting_on, status

    def _run_state(self, result: dict[str, Any] | None = None) -> RunStateWrite:
        self._upsert_visible()
        life = self._life
        phase, phase_name = self.position()
        return RunStateWrite(status=life.status, current_phase=phase, phase_name=phase_name,
                             hitl_state=life.waiting_on, result=result,
                             error_message=life.error_message, stop_reason=life.stop_reason)

    def _upsert_visible(self) -> None:
        """The Web UI's search attributes, upserted only on change: each upsert is an event
        in the workflow's history."""
        updates = self.search_attribute_updates()
        visible = tuple(update.value for update in updates)
        if visible != self._visible:
            self._visible = visible
            workflow.upsert_search_attributes(updates)


def _recorded_result(body: Callable[[], Awaitable[R]], result: dict[str, Any] | None) -> R:
    """The run's result as its `runs` row holds it, as the model `body` returns."""
    returns = get_type_hints(body).get("return")
    if isinstance(returns, type) and issubclass(returns, BaseModel):
        return cast(R, returns.model_validate(result))
    return cast(R, result)
