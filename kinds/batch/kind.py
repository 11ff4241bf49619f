"""The batch job as a registered run kind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.activities.items import BatchActivities
from waystation.kinds.batch.activities.items_source import ItemsSources, items_sources
from waystation.kinds.batch.activities.spec import StepTemplateRefused, check_templates
from waystation.kinds.batch.models import MAX_INLINE_ITEMS, BatchInput, BatchRunInput
from waystation.kinds.batch.rerun import RerunRefused, rerun_input
from waystation.kinds.batch.settings import BatchSettings
from waystation.kinds.batch.workflow import BatchJob
from waystation.sdk import (
    TERMINAL_RUN_STATUSES,
    ApiHooks,
    ConsoleHooks,
    ConsolePage,
    DataHooks,
    DecisionInput,
    ForkHooks,
    ForkPoint,
    ForkRefused,
    ForkSource,
    KindRetention,
    RunKind,
    RunStart,
    StartCheck,
    ViewContext,
    WorkerDeps,
    WorkerHooks,
    shorten,
)


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    batch = BatchActivities(deps.pool, deps.backend, items_sources=deps.of("batch"))
    return [batch.prepare_job, batch.run_slice, batch.run_item]


def _worker_deps(settings: Any) -> ItemsSources:
    """Where a job's `items_path` may point (the worker checks again when it reads)."""
    return items_sources(settings)


def _routers() -> list[Any]:
    from waystation.kinds.batch.routes import items, jobs, workers  # the API's, never the worker's

    return [jobs.router, items.router, workers.router]


def _mcp_tools() -> list[Any]:
    from waystation.kinds.batch import mcp  # the API's, never the worker's

    return mcp.tools()


async def _start_check(start: StartCheck) -> None:
    from waystation.kinds.batch.items_policy import check_items_source
    from waystation.sdk import ApiError

    check_items_source(start.input, start.settings)
    try:
        # Off the event loop: parsing long templates is CPU work (spec.py).
        await asyncio.to_thread(check_templates, start.input)
    except StepTemplateRefused as refused:
        where = ".".join(str(part) for part in ["input", *refused.loc])
        raise ApiError(422, "invalid_request", f"{where}: {refused}",
                       details=[{"loc": ["body", "input", *refused.loc], "msg": str(refused),
                                 "type": "template_refused"}]) from None


async def _view(view: ViewContext) -> dict[str, Any]:
    """A job's calls are counted on its items, not on run events."""
    counts = await jobs_repo.unit_counts(view.conn, view.run.id)
    return {"cost_usd": round(sum(c.cost_usd for c in counts), 9),
            "input_tokens": sum(c.input_tokens for c in counts),
            "output_tokens": sum(c.output_tokens for c in counts)}


async def _metrics(conn: Any) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    items = GaugeMetricFamily("waystation_batch_items", "Batch-job items by status",
                              labels=["status"])
    for status, count in await jobs_repo.item_counts(conn):
        items.add_metric([status], count)
    return [items]


def _build_input(run: RunStart) -> BatchRunInput:
    # The items stay in the run's row: the workflow gets the spec only, and a prepare
    # activity copies the items to work_units.
    return BatchRunInput(run_id=run.run_id, owner=run.owner, spec=run.input.spec())


def _summary(run: RunStart) -> str:
    return f"Batch job for {run.owner}: {shorten(run.input.name)}"


def _details(run: RunStart) -> str:
    job: BatchInput = run.input
    source = f"{len(job.items)} items" if job.items is not None else job.items_path
    return (f"run {run.run_id} · {source} · steps: {' → '.join(s.name for s in job.steps)} · "
            f"max_workers {job.max_workers}, max_retries {job.max_retries}")


class BatchForkInput(BaseModel):
    """A batch fork's `input`: which items of the source job, from which step."""

    model_config = ConfigDict(extra="forbid")
    items: list[UUID] | None = Field(None, min_length=1, max_length=MAX_INLINE_ITEMS,
                                     description="Item ids of the source job (default: all).")
    from_step: str | None = Field(None, description="The step they run again from, keeping "
                                                    "their outputs of earlier ones (default: "
                                                    "the first step).")


async def _fork_input(source: ForkSource) -> BatchInput:
    """The fork's job: the re-run (`POST /jobs/{id}/rerun`) of the chosen items from the
    chosen step. A batch snapshot holds counts, not where each item stands, so the step is
    the request's (default: the first)."""
    try:
        chosen = BatchForkInput.model_validate(source.replacing or {})
    except ValidationError as error:
        first = error.errors()[0]
        raise ForkRefused(first["msg"], field=".".join(["input", *map(str, first["loc"])]),
                          code="invalid_request") from error
    if source.status not in TERMINAL_RUN_STATUSES and source.waiting_on is None:
        # Items in flight have no settled outputs to keep. A job at a gate starts none (one
        # already running may still finish: the fork keeps the outputs recorded when made).
        raise ForkRefused(f"job {source.run_id} is {source.status}: fork it once it has "
                          "finished or while it waits at a gate", field="from",
                          code="job_not_finished")
    job = await jobs_repo.get_job(source.conn, source.run_id)
    if job is None:
        raise ForkRefused(f"job {source.run_id} has not stored its items yet", field="from",
                          code="job_not_finished")
    step = chosen.from_step
    try:
        return await rerun_input(source.conn, job, from_step=step, item_ids=chosen.items,
                                 name=f"{job.name} (fork from {step or 'the start'})")
    except RerunRefused as refused:
        field = ["items" if part == "item_ids" else str(part) for part in refused.field]
        raise ForkRefused(refused.message, field=".".join(["input", *field]),
                          code="invalid_request") from refused


def _fork(run: RunStart, point: ForkPoint) -> BatchRunInput:
    """The new job's argument; a decision is applied to its gate of that name when it opens
    (the test item failing again, or the budget reached)."""
    decided = DecisionInput.model_validate(point.decision) if point.decision else None
    return _build_input(run).model_copy(update={"decided": decided,
                                                "forked_from": point.forked_from})


BATCH = RunKind(
    name="batch", workflow=BatchJob, input_model=BatchInput, workflow_id_prefix="batch-",
    summary=_summary, details=_details, build_input=_build_input, settings=BatchSettings,
    api=ApiHooks(routers=_routers, start_check=_start_check, view=_view,
                 mcp_tools=_mcp_tools),
    console=ConsoleHooks(
        module=resources.files(__package__) / "console.js",
        pages=[ConsolePage(name="workers", title="Workers",
                           module=resources.files(__package__) / "console_workers.js")]),
    worker=WorkerHooks(activities=_activities, deps=_worker_deps),
    data=DataHooks(migrations=resources.files(__package__) / "migrations", metrics=_metrics,
                   retention=KindRetention(archive=jobs_repo.archive_sections,
                                           purge=jobs_repo.delete_item_outputs)),
    forks=ForkHooks(start=_fork, input=_fork_input),
    description="Many items through a pipeline of prompt-template steps (seeds 002, 004).")
