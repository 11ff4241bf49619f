"""The batch activities: store a job's items, then run one item through its pipeline.

Why one activity per item (all its steps) rather than one per step: it costs the job
workflow three history events per item whatever the number of steps, so a job's history stays
bounded by items, not items x steps. Every step's output is committed to Postgres before the
next step starts, and a (re)started item first reads what is stored, so a retry after a crash
resumes at the first step without an output: a completed step never runs again. The prompt of
every step is rendered from the stored outputs (seed 002's fix), never from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.agents import AgentBackend, AgentRequest
from activities.batch.loading import ItemsUnreadable, read_chunks
from activities.batch.spec import END, BatchJobSpec
from activities.batch.templates import TemplateProblem, evaluate, render
from persistence import jobs as jobs_repo
from persistence.writes import ReadModelWrite, apply_write

HEARTBEAT_EVERY_SECONDS = 2.0
# ApplicationError types the job workflow tells apart.
TEMPLATE_ERROR = "TemplateError"
ITEMS_UNREADABLE = "ItemsUnreadable"
ITEM_FAILED = "ItemFailed"


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


class ItemResult(BaseModel):
    status: str  # completed | failed
    steps_run: int = 0
    error: str | None = None


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


class BatchActivities:
    def __init__(self, pool: asyncpg.Pool, backend: AgentBackend) -> None:
        self._pool = pool
        self._backend = backend
        # A job's spec never changes once stored, so each process loads it once.
        self._specs: dict[UUID, BatchJobSpec] = {}

    @activity.defn(name="prepare_batch_job")
    async def prepare_job(self, job: PrepareJobInput) -> PrepareJobResult:
        """Store the job and every item once; a retried call finds what is already there."""
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
            else:
                try:
                    async for chunk in read_chunks(job.spec.items_path, jobs_repo.INSERT_CHUNK):
                        await jobs_repo.insert_units(conn, job.run_id, total, chunk)
                        total += len(chunk)
                        activity.heartbeat(total)
                except ItemsUnreadable as error:
                    raise ApplicationError(str(error), type=ITEMS_UNREADABLE,
                                           non_retryable=True) from None
            await jobs_repo.set_total(conn, job.run_id, total, job.spec.test_first)
        return PrepareJobResult(total=total)

    @activity.defn(name="run_batch_item")
    async def run_item(self, item: ItemInput) -> ItemResult:
        async with _heartbeating():
            return await self._run(item)

    async def _spec(self, conn: asyncpg.Connection, job_id: UUID) -> BatchJobSpec:
        spec = self._specs.get(job_id)
        if spec is None:
            stored = await jobs_repo.job_spec(conn, job_id)
            if stored is None:
                raise ApplicationError(f"job {job_id} is not stored", type=ITEM_FAILED)
            spec = self._specs[job_id] = BatchJobSpec.model_validate(stored)
        return spec

    async def _run(self, item: ItemInput) -> ItemResult:
        attempt = activity.info().attempt
        async with self._pool.acquire() as conn:
            if item.prelude is not None:
                await apply_write(conn, item.prelude)
            spec = await self._spec(conn, item.job_id)
            unit = await jobs_repo.start_unit(conn, item.job_id, item.ordinal, attempt - 1)
        if unit is None:
            raise ApplicationError(f"item {item.ordinal} of job {item.job_id} is not stored",
                                   type=ITEM_FAILED, non_retryable=True)
        if unit.status == "completed":
            return ItemResult(status="completed")
        if unit.status == "failed":
            # Failed for good by an earlier attempt whose result never reached the workflow.
            raise ApplicationError(unit.error or "failed", type=ITEM_FAILED, non_retryable=True)
        try:
            steps_run = await self._pipeline(spec, unit, attempt)
        except TemplateProblem as problem:
            message = f"{problem.args[0]}"
            await self._fail(unit.id, message, attempt, final=True)
            raise ApplicationError(message, type=TEMPLATE_ERROR, non_retryable=True) from None
        except Exception as error:
            final = attempt > item.max_retries
            await self._fail(unit.id, f"{type(error).__name__}: {error}", attempt, final=final)
            raise
        return ItemResult(status="completed", steps_run=steps_run)

    async def _fail(self, unit_id: UUID, error: str, attempt: int, *, final: bool) -> None:
        async with self._pool.acquire() as conn:
            await jobs_repo.fail_unit(conn, unit_id, final=final, error=error,
                                      retries=attempt - 1)

    async def _pipeline(self, spec: BatchJobSpec, unit: jobs_repo.StartedUnit,
                        attempt: int) -> int:
        """Run the item's remaining steps; returns how many ran now."""
        payload = unit.payload if isinstance(unit.payload, dict) else {"value": unit.payload}
        outputs: dict[str, Any] = dict(unit.outputs)
        step_name, ran = spec.steps[0].name, 0
        while step_name != END:
            index, step = spec.step_named(step_name)
            if step_name in outputs:
                # Stored before a crash or an earlier attempt: follow it, never re-run it.
                step_name = self._next(spec, index, payload, outputs)
                if step_name == END:
                    async with self._pool.acquire() as conn:
                        await jobs_repo.finish_unit(conn, unit.id)
                continue
            prompt = render(step.template, payload, outputs)
            started = time.monotonic()
            response = await self._backend.run(AgentRequest(
                crew="batch", task=step.name, agent=spec.name, instructions=prompt,
                context={"item_id": str(unit.id)}))
            outputs[step.name] = response.output
            following = self._next(spec, index, payload, outputs)
            now = time.monotonic()
            async with self._pool.acquire() as conn:
                await jobs_repo.record_step_output(conn, jobs_repo.StepOutputWrite(
                    unit_id=unit.id, step=step.name, step_index=index, output=response.output,
                    rendered_prompt=prompt, next_step=None if following == END else following,
                    cost_usd=response.cost_usd, input_tokens=response.input_tokens,
                    output_tokens=response.output_tokens,
                    duration_ms=int((now - started) * 1000), attempt=attempt,
                    item_done=following == END,
                    execution_ms=int((_now() - unit.started_at.timestamp()) * 1000)))
            step_name, ran = following, ran + 1
        return ran

    def _next(self, spec: BatchJobSpec, index: int, payload: dict[str, Any],
              outputs: dict[str, Any]) -> str:
        step = spec.steps[index]
        for rule in step.branches:
            if evaluate(rule.when, payload, outputs, outputs[step.name]):
                return rule.goto
        return spec.default_next(index)


def _now() -> float:
    return time.time()
