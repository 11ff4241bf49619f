"""Runs one crew task through the agent backend and records its own progress events.

The task writes its started / completed / failed events itself, rather than the workflow
scheduling one activity per event: that spends Temporal events sparingly and puts the
"started" row in Postgres the moment the work begins (in place, where a task usually ends in
milliseconds, with its "completed" row unless it takes longer: `STARTED_WITHIN`). Keys come
from the workflow (plus the attempt number for failures), so a retried attempt finds its first
rows instead of doubling.

Each attempt's completed or failed event carries that attempt's usage (`output.usage`:
tokens, cost, model), and the run's totals follow from those rows (migration 010). The task
sends its prompt file as the system prompt and its output model's JSON Schema, and checks the
answer against the model. Retries: the workflow's policy retries without limit, and this
activity gives up (non-retryable) once a failing task has been retrying for
`RETRY_WINDOW`; so a worker crash, which fails nothing here, never uses up a task's tries.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel, Field, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from waystation.kinds.validation.activities.outputs import TASK_OUTPUTS
from waystation.kinds.validation.activities.prompts import task_prompt
from waystation.sdk import AgentBackend, AgentRequest, EventWrite
from waystation.sdk.agents import INVALID_OUTPUT, ModelCallFailed, Usage, usage_of
from waystation.sdk.writes import (
    ReadModelActivities,
    ReadModelWrite,
    append_events,
    merge_writes,
    retry_while_unavailable,
)

# How often a running crew task tells Temporal it is alive. The workflow sets a heartbeat
# timeout a few times longer, so a task whose worker died is retried within seconds rather
# than after its start-to-close timeout (the SDK throttles the actual sends to 0.8x that).
HEARTBEAT_EVERY_SECONDS = 2.0
# How long a failing task keeps retrying (429s honour Retry-After within it) before the
# workflow is told it failed for good.
RETRY_WINDOW = timedelta(minutes=10)
RETRIES_EXHAUSTED = "TaskRetriesExhausted"
# A task run in place (a backend that answers at once) that ends within this long writes its
# `task.started` with its `task.completed`: one statement a task instead of two, where nobody
# could have watched it start. A longer one writes `task.started` when this has passed (or
# at its first progress report); a regular activity's task writes it at once.
STARTED_WITHIN = timedelta(milliseconds=50)


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)

    beater = asyncio.create_task(beat())
    try:
        yield
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater


class CrewTaskInput(BaseModel):
    run_id: UUID
    event_key: str
    phase: int
    crew: str
    task: str
    agent: str
    instructions: str
    context: dict[str, Any] = Field(default_factory=dict)
    feedback: str | None = None
    model: str | None = None
    temperature: float | None = None
    progress_pct_started: int
    progress_pct_done: int
    # Bookkeeping the workflow staged (the phase starting, the last one's snapshot): applied
    # in the same transaction as this task's "started" event.
    prelude: ReadModelWrite | None = None


class CrewTaskResult(BaseModel):
    output: dict[str, Any]
    duration_ms: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class CrewTaskActivities:
    def __init__(self, pool: asyncpg.Pool, backend: AgentBackend,
                 read_model: ReadModelActivities) -> None:
        self._pool = pool
        self._backend = backend
        # Every write goes through the recorder's: a staged write that tells people something
        # (a gate's decision written with this task's first) gets its webhooks and mails.
        self._read_model = read_model

    def _event(self, task: CrewTaskInput, suffix: str, status: str, **fields: Any) -> EventWrite:
        return EventWrite(event_key=f"{task.event_key}:{suffix}", type=f"task.{status}",
                          phase=task.phase, crew=task.crew, task=task.task, agent=task.agent,
                          status=status, **fields)

    async def _append(self, task: CrewTaskInput, event: EventWrite) -> None:
        async def append() -> None:
            async with self._pool.acquire() as conn:
                await append_events(conn, task.run_id, [event])
        await retry_while_unavailable(append)

    async def _apply(self, write: ReadModelWrite) -> None:
        await retry_while_unavailable(lambda: self._read_model.apply(write))

    @activity.defn(name="run_crew_task")
    async def run_crew_task(self, task: CrewTaskInput) -> CrewTaskResult:
        if activity.info().is_local:
            # Run in place: a local activity has no heartbeat; the worker keeps its workflow
            # task alive instead, and a dead worker's task times out and is run again.
            return await self._run(task)
        async with _heartbeating():
            return await self._run(task)

    async def _run(self, task: CrewTaskInput) -> CrewTaskResult:
        started_event = self._event(task, "started", "started",
                                    progress_pct=task.progress_pct_started)
        first = ReadModelWrite(run_id=task.run_id, events=[started_event])
        opening = _Opening(merge_writes(task.prelude, first) if task.prelude else first,
                           self._apply)
        if not activity.info().is_local:
            # A regular activity's task is a model provider's call, seconds long, and a
            # decision handed over with it waits for this write: at once.
            await opening.write()
        started = time.monotonic()

        async def report(percent: int, note: str) -> None:
            # Keyed by the task's percent, so a retried attempt re-reporting the same point
            # finds the first row rather than adding a second one.
            percent = max(0, min(100, percent))
            span = task.progress_pct_done - task.progress_pct_started
            await opening.write()
            await self._append(task, self._event(
                task, f"progress:{percent}", "in_progress",
                progress_pct=task.progress_pct_started + span * percent // 100,
                output={"task_pct": percent, "note": note}))

        output_model = TASK_OUTPUTS.get(task.task)
        call = asyncio.ensure_future(self._backend.run(AgentRequest(
            crew=task.crew, task=task.task, agent=task.agent,
            instructions=task.instructions, system=task_prompt(task.task),
            context=task.context, feedback=task.feedback,
            output_schema=_output_schema(output_model) if output_model else None,
            schema_name=task.task, model=task.model, temperature=task.temperature),
            report))
        try:
            if not (await asyncio.wait({call}, timeout=STARTED_WITHIN.total_seconds()))[0]:
                await opening.write()  # a long task shows it has started
            response = await call
            output = _typed(task.task, output_model, response.output, response.usage)
        except Exception as error:
            await opening.write()
            await self._record_failure(task, error, started)
            if (final := self._give_up(error)) is not error:
                raise final from error
            raise
        finally:
            call.cancel()  # when the activity itself is cancelled; a no-op once it is done
        duration_ms = int((time.monotonic() - started) * 1000)
        completed = self._event(
            task, "completed", "completed", progress_pct=task.progress_pct_done,
            output={"result": output, "usage": response.usage.model_dump()},
            duration_ms=duration_ms)
        # Done before anyone could see it start: both events, and what was handed over, in
        # one statement (one transaction instead of two).
        if not await opening.write(completed):
            await self._append(task, completed)
        return CrewTaskResult(output=output, duration_ms=duration_ms,
                              input_tokens=response.input_tokens,
                              output_tokens=response.output_tokens, cost_usd=response.cost_usd)

    async def _record_failure(self, task: CrewTaskInput, error: Exception,
                              started: float) -> None:
        attempt = activity.info().attempt
        message = error.message if isinstance(error, ApplicationError) else str(error)
        await self._append(task, self._event(
            task, _failure_key(activity.info()), "failed",
            error_message=f"{type(error).__name__}: {message}",
            output={"attempt": attempt, "usage": usage_of(error).model_dump()},
            duration_ms=int((time.monotonic() - started) * 1000)))

    def _give_up(self, error: Exception) -> Exception:
        """`error` itself, or a non-retryable one once the task has retried long enough."""
        if isinstance(error, ApplicationError) and error.non_retryable:
            return error
        info = activity.info()
        retrying = info.current_attempt_scheduled_time - info.scheduled_time
        if retrying < RETRY_WINDOW:
            return error
        message = error.message if isinstance(error, ApplicationError) else str(error)
        return ApplicationError(
            f"{info.attempt} attempts over {int(retrying.total_seconds())} s; last error: "
            f"{message}", type=RETRIES_EXHAUSTED, non_retryable=True)


class _Opening:
    """A task's first write (its `task.started`, with whatever was handed over to go with
    it), written once: at the first of `write()` calls, or with the task's completion."""

    def __init__(self, write: ReadModelWrite,
                 apply: Callable[[ReadModelWrite], Awaitable[None]]) -> None:
        self.pending: ReadModelWrite | None = write
        self._apply = apply
        self._lock = asyncio.Lock()

    async def write(self, *then: EventWrite) -> bool:
        """Write it, with `then`'s events after it in the same statement, unless it has been
        written already (then nothing is written, `then` included); whether it wrote."""
        async with self._lock:
            if self.pending is None:
                return False
            write = self.pending
            if then:
                write = merge_writes(write, ReadModelWrite(run_id=write.run_id,
                                                           events=list(then)))
            await self._apply(write)
            self.pending = None
            return True


def _failure_key(info: activity.Info) -> str:
    """The failed event's key: its attempt's. A local activity's attempts reach the history
    only with its workflow task, so after a worker dies in one the next worker counts them
    from 1 again: its key also carries when the attempt was scheduled, so a second failure
    with the same number is written beside the first (with its usage), not taken for it."""
    if not info.is_local:
        return f"failed:{info.attempt}"
    scheduled_ms = int(info.current_attempt_scheduled_time.timestamp() * 1000)
    return f"failed:{info.attempt}:{scheduled_ms}"


@functools.cache
def _schema_text(model: type[BaseModel]) -> str:
    # pydantic builds a model's JSON Schema afresh on every call: about a millisecond, as
    # much as the rest of a task run in place with a backend that answers at once.
    return json.dumps(model.model_json_schema())


def _output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON Schema, a fresh copy for each request (a backend may change its own)."""
    return json.loads(_schema_text(model))


def _typed(task: str, model: type[BaseModel] | None, output: dict[str, Any] | None,
           usage: Usage) -> dict[str, Any]:
    """The answer checked against the task's output model, as JSON."""
    if model is None:
        return output or {}
    try:
        return model.model_validate(output or {}).model_dump(mode="json")
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        # The call was paid for: its usage stays with the failure.
        raise ModelCallFailed(f"{task}: the answer is invalid: field {where!r}: {first['msg']}",
                              type=INVALID_OUTPUT, non_retryable=True, usage=usage) from None
