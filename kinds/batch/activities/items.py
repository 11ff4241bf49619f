"""The batch activities: store a job's items, then run items through their pipeline.

Items run in *slices*: one activity runs a few consecutive items one after another (so a slice
is one of `max_workers`, never more), on one database connection, and reports which items
failed instead of raising. The workflow then retries just those items one at a time with
`run_batch_item`, under the Temporal retry policy (backoff, `max_retries`). A slice costs the
job's history three events however many items and steps it ran, and spares every item its own
activity round trip through the server; a slice stops after `SLICE_BUDGET_SECONDS`, handing
back the items it did not reach, so slow agents get slices of one item.

Every step's output is committed to Postgres before the next step starts, and a (re)started
item first reads what is stored, so a retry after a crash resumes at the first step without an
output: a completed step never runs again. The prompt of every step is rendered from the
stored outputs (seed 002's fix), never from memory, and every answer is stored with the flags
of the output checks (kinds/batch/activities/checks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import UUID

import asyncpg
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.activities.checks import output_flags
from waystation.kinds.batch.activities.items_source import ItemsSources
from waystation.kinds.batch.activities.lease import ConnectionLease
from waystation.kinds.batch.activities.loading import ItemsUnreadable, read_chunks
from waystation.kinds.batch.activities.render_process import evaluate_bounded, render_bounded
from waystation.kinds.batch.activities.spec import END, BatchJobSpec
from waystation.kinds.batch.activities.templates import TemplateProblem
from waystation.sdk import AgentBackend, AgentRequest, AgentResponse
from waystation.sdk.agents import (
    INVALID_OUTPUT,
    AnswerProblem,
    ModelCallFailed,
    Usage,
    usage_of,
    validate_answer,
)
from waystation.sdk.writes import (
    UNAVAILABLE_ERRORS,
    ReadModelWrite,
    apply_write,
    retry_while_unavailable,
)

HEARTBEAT_EVERY_SECONDS = 2.0
# A slice starts no item after this long; the rest go back to the workflow's queue.
SLICE_BUDGET_SECONDS = 2.0
# Errors reported in a slice's result (and so in history) are cut to this length.
ERROR_CHARS = 500
# ApplicationError types the job workflow tells apart.
TEMPLATE_ERROR = "TemplateError"
ITEMS_UNREADABLE = "ItemsUnreadable"
ITEM_FAILED = "ItemFailed"
# How long slices and items wait for the database to come back before they fail (and the
# workflow's retries, then its one-item-at-a-time fallback, take over).
OUTAGE_PATIENCE_SECONDS = 300.0
T = TypeVar("T")


class PrepareJobInput(BaseModel):
    run_id: UUID
    spec: BatchJobSpec


class PrepareJobResult(BaseModel):
    total: int


class ItemInput(BaseModel):
    job_id: UUID
    ordinal: int
    max_retries: int
    # Bookkeeping the workflow staged (progress events), applied before the item starts.
    prelude: ReadModelWrite | None = None
    # The item's attempt number at this activity's first attempt (2 after a failed slice try).
    first_attempt: int = 1
    # Report the job's spend so far (a job with a budget).
    report_spend: bool = False


class ItemResult(BaseModel):
    status: str  # completed | failed
    steps_run: int = 0
    error: str | None = None
    job_cost_usd: float | None = None


class SliceInput(BaseModel):
    job_id: UUID
    first_ordinal: int
    count: int = Field(ge=1)
    max_retries: int
    prelude: ReadModelWrite | None = None
    report_spend: bool = False


class SliceFailure(BaseModel):
    ordinal: int
    error: str
    # No attempt left (max_retries 0, a template error, failed earlier): failed for good.
    final: bool


class SliceResult(BaseModel):
    # The first ordinal the slice did not reach (first_ordinal + count when it ran them all).
    next_ordinal: int
    completed: int = 0
    failures: list[SliceFailure] = Field(default_factory=list)
    # The job's spend after this slice, every attempt counted (when asked to report it).
    job_cost_usd: float | None = None


@dataclass
class _StepAt:
    """Where an attempt stands: the step it runs and the prompt it sent (None before the
    prompt is rendered), so a failure is recorded with what was asked."""

    step: str | None = None
    prompt: str | None = None


def _worker_start() -> jobs_repo.WorkerStart:
    """This worker, as Temporal's task-queue description names its pollers (the worker's
    identity is its client's), starting now: GET /workers joins the two."""
    return jobs_repo.WorkerStart(worker_id=activity.client().identity,
                                 assigned_at=datetime.now(UTC))


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    async def beat() -> None:
        # Not at once: the heartbeat timeout runs from the start anyway, and a slice of fast
        # items is over before its first beat would be due.
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)
            activity.heartbeat()

    beater = asyncio.create_task(beat())
    try:
        yield
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater


class BatchActivities:
    def __init__(self, pool: asyncpg.Pool, backend: AgentBackend, *,
                 items_sources: ItemsSources | None = None) -> None:
        self._pool = pool
        self._backend = backend
        self._items_sources = items_sources or ItemsSources()  # none allowed unless configured
        # A job's spec never changes once stored, so each process loads it once.
        self._specs: dict[UUID, BatchJobSpec] = {}

    @activity.defn(name="prepare_batch_job")
    async def prepare_job(self, job: PrepareJobInput) -> PrepareJobResult:
        """Store the job and every item once; a retried call finds what is already there."""
        return await _waiting_out_outages(lambda: self._prepare(job))

    async def _prepare(self, job: PrepareJobInput) -> PrepareJobResult:
        async with self._pool.acquire() as conn:
            if (total := await jobs_repo.job_total(conn, job.run_id)) > 0:
                return PrepareJobResult(total=total)
            await jobs_repo.insert_job(conn, job.run_id, name=job.spec.name,
                                       spec=job.spec.model_dump(mode="json"),
                                       max_workers=job.spec.max_workers)
            total = 0
            if job.spec.items_path is None:
                items = await jobs_repo.run_items(conn, job.run_id)
                for start in range(0, len(items), jobs_repo.INSERT_CHUNK):
                    await jobs_repo.insert_units(conn, job.run_id, start,
                                                 items[start:start + jobs_repo.INSERT_CHUNK])
                total = len(items)
                # A re-run's items start with the earlier steps' outputs they keep.
                await jobs_repo.keep_earlier_outputs(conn, job.run_id,
                                                     [s.name for s in job.spec.steps])
            else:
                try:
                    async for chunk in read_chunks(job.spec.items_path, jobs_repo.INSERT_CHUNK,
                                                 self._items_sources):
                        await jobs_repo.insert_units(conn, job.run_id, total, chunk)
                        total += len(chunk)
                        activity.heartbeat(total)
                except ItemsUnreadable as error:
                    raise ApplicationError(str(error), type=ITEMS_UNREADABLE,
                                           non_retryable=True) from None
            await jobs_repo.set_total(conn, job.run_id, total, job.spec.test_first)
        return PrepareJobResult(total=total)

    @activity.defn(name="run_batch_slice")
    async def run_slice(self, batch: SliceInput) -> SliceResult:
        """Run the first attempt of consecutive items, one at a time; report, never raise,
        an item's failure (the workflow retries that item alone).

        A database outage is waited out here, heartbeating, and the slice then starts over:
        items it finished are skipped and a finished step is never run again, so neither the
        slice's retries nor the items' are spent on it."""
        async with _heartbeating():
            return await _waiting_out_outages(lambda: self._slice(batch))

    async def _slice(self, batch: SliceInput) -> SliceResult:
        result = SliceResult(next_ordinal=batch.first_ordinal)
        deadline = time.monotonic() + SLICE_BUDGET_SECONDS
        # Every item of the slice was assigned to this worker when the slice began.
        worker = _worker_start()
        async with ConnectionLease(self._pool) as lease:
            conn = await lease.conn()
            if batch.prelude is not None:
                await apply_write(conn, batch.prelude)
            spec = await self._spec(conn, batch.job_id)
            # The last step of the item just run, written with the next item's start.
            finishing: jobs_repo.StepOutputWrite | None = None
            for ordinal in range(batch.first_ordinal, batch.first_ordinal + batch.count):
                if ordinal > batch.first_ordinal and time.monotonic() > deadline:
                    break
                failure, finishing = await self._slice_item(lease, spec, batch, ordinal,
                                                            finishing, worker)
                if failure is None:
                    result.completed += 1
                else:
                    result.failures.append(failure)
                result.next_ordinal = ordinal + 1
            if finishing is not None:
                await jobs_repo.record_step_output(await lease.conn(), finishing)
            if batch.report_spend:
                result.job_cost_usd = await jobs_repo.job_cost(await lease.conn(), batch.job_id)
        return result

    async def _slice_item(self, lease: ConnectionLease, spec: BatchJobSpec, batch: SliceInput,
                          ordinal: int, finishing: jobs_repo.StepOutputWrite | None,
                          worker: jobs_repo.WorkerStart,
                          ) -> tuple[SliceFailure | None, jobs_repo.StepOutputWrite | None]:
        """Run one item of a slice after writing `finishing`; returns its failure, and its
        last step's write when that is left for the next item's start to carry."""
        unit = await jobs_repo.start_unit(await lease.conn(), batch.job_id, ordinal, 0,
                                          run_retrying=False, worker=worker,
                                          finishing=finishing)
        if unit is None:
            return SliceFailure(ordinal=ordinal, error="not stored", final=True), None
        if unit.previous_status == "completed":
            return None, None
        if unit.previous_status in ("failed", "retrying"):
            # Decided by an earlier try of this slice whose result never reached the workflow.
            return SliceFailure(ordinal=ordinal, error=_cut(unit.error or "failed"),
                                final=unit.previous_status == "failed"), None
        try:
            _, last = await self._attempt(lease, spec, unit, 1, batch.max_retries,
                                          hold_last=True)
        except UNAVAILABLE_ERRORS:
            raise
        except ApplicationError as error:  # a template error, or the agent's own verdict
            return SliceFailure(ordinal=ordinal, error=_cut(error.message),
                                final=error.non_retryable or batch.max_retries == 0), None
        except Exception as error:  # noqa: BLE001 - recorded on the item, retried by the workflow
            return SliceFailure(ordinal=ordinal, error=_cut(_describe(error)),
                                final=batch.max_retries == 0), None
        return None, last

    @activity.defn(name="run_batch_item")
    async def run_item(self, item: ItemInput) -> ItemResult:
        """One attempt at one item; a database outage is waited out, as in a slice."""
        async def attempt() -> ItemResult:
            async with ConnectionLease(self._pool) as lease:
                result = await self._run(lease, item)
                if item.report_spend:
                    result.job_cost_usd = await jobs_repo.job_cost(await lease.conn(),
                                                                   item.job_id)
                return result

        async with _heartbeating():
            return await _waiting_out_outages(attempt)

    async def _spec(self, conn: asyncpg.Connection, job_id: UUID) -> BatchJobSpec:
        spec = self._specs.get(job_id)
        if spec is None:
            stored = await jobs_repo.job_spec(conn, job_id)
            if stored is None:
                raise ApplicationError(f"job {job_id} is not stored", type=ITEM_FAILED)
            spec = self._specs[job_id] = BatchJobSpec.model_validate(stored)
        return spec

    async def _run(self, lease: ConnectionLease, item: ItemInput) -> ItemResult:
        attempt = activity.info().attempt + item.first_attempt - 1
        conn = await lease.conn()
        if item.prelude is not None:
            await apply_write(conn, item.prelude)
        spec = await self._spec(conn, item.job_id)
        unit = await jobs_repo.start_unit(conn, item.job_id, item.ordinal, attempt - 1,
                                          run_retrying=True, worker=_worker_start())
        if unit is None:
            raise ApplicationError(f"item {item.ordinal} of job {item.job_id} is not stored",
                                   type=ITEM_FAILED, non_retryable=True)
        if unit.status == "completed":
            return ItemResult(status="completed")
        if unit.status == "failed":
            # Failed for good by an earlier attempt whose result never reached the workflow.
            raise ApplicationError(unit.error or "failed", type=ITEM_FAILED, non_retryable=True)
        steps_run, _ = await self._attempt(lease, spec, unit, attempt, item.max_retries)
        return ItemResult(status="completed", steps_run=steps_run)

    async def _attempt(self, lease: ConnectionLease, spec: BatchJobSpec,
                       unit: jobs_repo.StartedUnit, attempt: int, max_retries: int, *,
                       hold_last: bool = False) -> tuple[int, jobs_repo.StepOutputWrite | None]:
        """One attempt at a started item: a failure is recorded on the item, then raised.

        An unreachable database is not the item's failure: it is raised unrecorded, and the
        activity waits the outage out and starts the item again where it stopped."""
        at = _StepAt()
        try:
            return await self._pipeline(lease, spec, unit, attempt, at, hold_last=hold_last)
        except TemplateProblem as problem:
            message = f"{problem.args[0]}"
            await self._fail(lease, unit.id, message, attempt, at, final=True)
            raise ApplicationError(message, type=TEMPLATE_ERROR, non_retryable=True) from None
        except Exception as error:
            if not isinstance(error, UNAVAILABLE_ERRORS):
                final = attempt > max_retries or (
                    isinstance(error, ApplicationError) and error.non_retryable)
                await self._fail(lease, unit.id, _describe(error), attempt, at, final=final,
                                 usage=usage_of(error))
            raise

    async def _fail(self, lease: ConnectionLease, unit_id: UUID, error: str, attempt: int,
                    at: _StepAt, *, final: bool, usage: Usage | None = None) -> None:
        spent = usage or Usage()
        await jobs_repo.fail_unit(await lease.conn(), unit_id, final=final, error=error,
                                  retries=attempt - 1, cost_usd=spent.cost_usd,
                                  input_tokens=spent.input_tokens,
                                  output_tokens=spent.output_tokens, step=at.step,
                                  prompt=at.prompt)

    async def _pipeline(self, lease: ConnectionLease, spec: BatchJobSpec,
                        unit: jobs_repo.StartedUnit, attempt: int, at: _StepAt, *,
                        hold_last: bool) -> tuple[int, jobs_repo.StepOutputWrite | None]:
        """Run the item's remaining steps; returns how many ran now and, with `hold_last`,
        the write of the step that completes the item, for the caller to make (as a crash
        before any commit would, a crash before it runs that step again: never a stored one)."""
        payload = unit.payload if isinstance(unit.payload, dict) else {"value": unit.payload}
        outputs: dict[str, Any] = dict(unit.outputs)
        step_name, ran = spec.steps[0].name, 0
        while step_name != END:
            index, step = spec.step_named(step_name)
            if step_name in outputs:
                # Stored before a crash or an earlier attempt: follow it, never re-run it.
                step_name = await self._next(spec, index, payload, outputs)
                if step_name == END:
                    await jobs_repo.finish_unit(await lease.conn(), unit.id)
                continue
            # In a render process: a render is CPU work (up to its budget, see
            # templates.py) that must not hold up this worker's event loop, and so every
            # other job's items, nor take its memory (render_process.py).
            at.step, at.prompt = step.name, None
            prompt = at.prompt = await render_bounded(step.template, payload, outputs)
            started = time.monotonic()
            response = await lease.wait(self._backend.run(AgentRequest(
                crew="batch", task=step.name, agent=spec.name, instructions=prompt,
                system=step.system, item_id=str(unit.id),
                output_schema=step.output_schema, schema_name=step.name, model=step.model,
                temperature=step.temperature)))
            output = _step_output(step.name, step.output_schema, response)
            outputs[step.name] = output
            following = await self._next(spec, index, payload, outputs)
            now = time.monotonic()
            write = jobs_repo.StepOutputWrite(
                unit_id=unit.id, step=step.name, step_index=index, output=output,
                rendered_prompt=prompt, next_step=None if following == END else following,
                cost_usd=response.cost_usd, input_tokens=response.input_tokens,
                output_tokens=response.output_tokens,
                duration_ms=int((now - started) * 1000), attempt=attempt,
                item_done=following == END,
                execution_ms=int((_now() - unit.started_at.timestamp()) * 1000),
                flags=output_flags(step.name, response.text),
                output_files=response.output_files, session_id=response.session_id)
            ran += 1
            if hold_last and following == END:
                return ran, write
            await jobs_repo.record_step_output(await lease.conn(), write)
            step_name = following
        return ran, None

    async def _next(self, spec: BatchJobSpec, index: int, payload: dict[str, Any],
                    outputs: dict[str, Any]) -> str:
        step = spec.steps[index]
        for rule in step.branches:
            if await evaluate_bounded(rule.when, payload, outputs, outputs[step.name]):
                return rule.goto
        return spec.default_next(index)


async def _waiting_out_outages(call: Callable[[], Awaitable[T]]) -> T:
    return await retry_while_unavailable(call, give_up_after=OUTAGE_PATIENCE_SECONDS)


def _step_output(step: str, schema: dict[str, Any] | None,
                 response: AgentResponse) -> dict[str, Any]:
    """What item_outputs keeps of an answer: its text and its fields (checked when the step
    has a schema; a backend that re-asks has done so already)."""
    if schema is not None:
        try:
            validate_answer(response.output or {}, schema)
        except AnswerProblem as problem:
            raise ModelCallFailed(f"step {step}: the answer is invalid: {problem}",
                                  type=INVALID_OUTPUT, non_retryable=True,
                                  usage=response.usage) from None
    return {"text": response.text, "fields": response.output}


def _describe(error: Exception) -> str:
    if isinstance(error, ApplicationError):
        return error.message
    return f"{type(error).__name__}: {error}"


def _cut(error: str) -> str:
    return error if len(error) <= ERROR_CHARS else error[:ERROR_CHARS - 1] + "…"


def _now() -> float:
    return time.time()
