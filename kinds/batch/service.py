"""Batch jobs: find one the caller may see, its progress, its items by status or step and their
step outputs, pausing and resuming it, and running chosen items of a finished job again (from
a chosen step, or its failed items from the start) as a new job.

A job's id is its run's id. A job belongs to its run's owner and group: another user's job
answers 404, exactly like another user's run.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg
from temporalio.client import Client

from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.models import BatchInput, PauseInput
from waystation.kinds.batch.repository import JobRow, UnitRow
from waystation.kinds.batch.rerun import RerunRefused, rerun_input, step_index
from waystation.kinds.batch.schemas import (
    ItemOutputs,
    ItemPage,
    ItemQuery,
    ItemView,
    JobControlAccepted,
    JobView,
    OrdinalPage,
    OutputView,
    RerunRequest,
    StepOutputPage,
    StepOutputView,
)
from waystation.kinds.batch.workflow import BatchJob
from waystation.sdk import TERMINAL_RUN_STATUSES, ApiError, Settings, invalid_field
from waystation.sdk.gates import DEFAULT_DECIDER_ROLES
from waystation.sdk.reads import RunRow, get_run
from waystation.sdk.routes import RunCreated
from waystation.sdk.services import (
    User,
    create_and_start,
    execute_update,
    may_read,
    require_decider,
    require_run_starter,
)


async def visible_job(conn: asyncpg.Connection, user: User, job_id: UUID) -> JobRow:
    """The job, if the caller may see its run; otherwise indistinguishable from none."""
    job = await jobs_repo.get_job(conn, job_id)
    run = await get_run(conn, job.run_id) if job else None
    if job is None or run is None or not await may_read(conn, user, run):
        raise ApiError(404, "job_not_found", f"job {job_id} not found")
    return job


async def visible_item(conn: asyncpg.Connection, user: User, item_id: UUID) -> UnitRow:
    """The item, if the caller may see its job's run; otherwise indistinguishable from none."""
    found = await jobs_repo.get_unit(conn, item_id)
    run = await get_run(conn, found[1]) if found else None
    if found is None or run is None or not await may_read(conn, user, run):
        raise ApiError(404, "item_not_found", f"item {item_id} not found")
    return found[0]


async def job_view(conn: asyncpg.Connection, job: JobRow) -> JobView:
    """The job with its items counted by status, and cost and token totals."""
    return JobView.of(job, await jobs_repo.unit_counts(conn, job.id))


async def list_items(conn: asyncpg.Connection, job: JobRow, query: ItemQuery) -> ItemPage:
    """The job's items in ordinal order, filtered by status and by the step they stand at;
    `cursor` reads on. A step the job does not have is a 422 naming `at_step`."""
    if query.at_step is not None:
        require_step(job, query.at_step, loc=["query", "at_step"])
    after = _after_ordinal(query)
    units = await jobs_repo.list_units(conn, job.id, status=query.status, after_ordinal=after,
                                       limit=query.limit + 1, at_step=query.at_step,
                                       flagged=query.flagged) if after is not None else []
    page, more = units[:query.limit], len(units) > query.limit
    return ItemPage(items=[ItemView.of(u) for u in page],
                    next_cursor=str(page[-1].ordinal) if more else None)


async def step_outputs(conn: asyncpg.Connection, job: JobRow, step: str,
                       query: OrdinalPage) -> StepOutputPage:
    """One step's outputs across the job, in item order; `cursor` reads on. A step the job
    does not have is a 422 naming it."""
    require_step(job, step, loc=["path", "step"])
    after = _after_ordinal(query)
    rows = await jobs_repo.list_step_outputs(conn, job.id, step, after_ordinal=after,
                                             limit=query.limit + 1) if after is not None else []
    page, more = rows[:query.limit], len(rows) > query.limit
    return StepOutputPage(outputs=[StepOutputView.of(r) for r in page],
                          next_cursor=str(page[-1].ordinal) if more else None)


def require_step(job: JobRow, step: str, *, loc: list[str | int]) -> None:
    """A 422 naming `loc` for a step the job does not have."""
    try:
        step_index(job, step)
    except RerunRefused as refused:
        raise invalid_field(loc, refused.message, refused.code) from refused


def _after_ordinal(page: OrdinalPage) -> int | None:
    """The ordinal a page reads after; None past every item: ordinals are 32-bit, and the
    cursor's pattern lets ten digits through."""
    after = int(page.cursor) if page.cursor is not None else -1
    return after if after < 2**31 - 1 else None


async def item_outputs(conn: asyncpg.Connection, item: UnitRow) -> ItemOutputs:
    """Every step output of the item, in the order the steps ran."""
    outputs = await jobs_repo.list_outputs(conn, item.id)
    return ItemOutputs(item_id=item.id, path=item.path,
                       outputs=[OutputView.of(o) for o in outputs])


async def item_output(conn: asyncpg.Connection, item: UnitRow, step: str) -> OutputView:
    """One step's output; 404 when the item has not run (or will not run) that step."""
    output = await jobs_repo.get_output(conn, item.id, step)
    if output is None:
        raise ApiError(404, "output_not_found", f"item {item.id} has no output for {step!r}")
    return OutputView.of(output)


async def retry_failed(conn: asyncpg.Connection, temporal: Client, user: User, job: JobRow, *,
                       settings: Settings, idempotency_key: str | None = None) -> RunCreated:
    """Run the failed items of a finished job again, as a new job with the same pipeline;
    409 while the job runs or when none failed. The finished job keeps its final status."""
    _require_finished(job)
    rerun = await _rerun_input(conn, job, from_step=None, status="failed",
                               name=f"{job.name} (retry)")
    if not rerun.items:
        raise ApiError(409, "no_failed_items", f"job {job.id} has no failed items")
    return await _start(conn, temporal, user, job, rerun, settings=settings,
                        idempotency_key=idempotency_key)


async def rerun_items(conn: asyncpg.Connection, temporal: Client, user: User, job: JobRow,
                      request: RerunRequest, *, settings: Settings,
                      idempotency_key: str | None = None) -> RunCreated:
    """Run chosen items of a finished job (default: all) again from a chosen step, as a new
    job with the same pipeline whose items keep their outputs of the steps before it. A step
    the job does not have, or an id that is not one of its items, is a 422 naming the field;
    409 while the job runs. The finished job keeps its final status."""
    rerun = await _rerun_input(conn, job, from_step=request.from_step,
                               item_ids=request.item_ids,
                               name=f"{job.name} (rerun from {request.from_step})")
    _require_finished(job)
    return await _start(conn, temporal, user, job, rerun, settings=settings,
                        idempotency_key=idempotency_key)


def _require_finished(job: JobRow) -> None:
    # Items still in flight have no settled outputs to keep or status to go by.
    if job.status not in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "job_not_finished", f"job {job.id} is {job.status}; run its "
                                                "items again once it has finished")


async def _rerun_input(conn: asyncpg.Connection, job: JobRow, *, from_step: str | None,
                       item_ids: list[UUID] | None = None, status: str | None = None,
                       name: str) -> BatchInput:
    """`rerun_input`, its refusals answered as the request's fields."""
    try:
        return await rerun_input(conn, job, from_step=from_step, item_ids=item_ids,
                                 status=status, name=name)
    except RerunRefused as refused:
        if refused.status == 422:
            raise invalid_field(["body", *refused.field], refused.message,
                                refused.code) from refused
        raise ApiError(refused.status, refused.code, refused.message) from refused


async def _start(conn: asyncpg.Connection, temporal: Client, user: User, job: JobRow,
                 rerun: BatchInput, *, settings: Settings,
                 idempotency_key: str | None) -> RunCreated:
    """Start the re-run as a job of the source's group and project."""
    source = await _job_run(conn, job)
    if source.group_id is not None:
        await require_run_starter(conn, user, source.group_id)
    run, outcome = await create_and_start(
        conn, temporal, settings.temporal_task_queue, BATCH, owner=user.name, input=rerun,
        project_id=source.project_id, idempotency_key=idempotency_key,
        group_id=source.group_id)
    return RunCreated.of(run, outcome)


async def pause_job(conn: asyncpg.Connection, temporal: Client, user: User,
                    job: JobRow) -> JobControlAccepted:
    """Stop starting items (those in flight finish); 409 unless the job is running."""
    return await _control(conn, temporal, user, job, BatchJob.pause)


async def resume_job(conn: asyncpg.Connection, temporal: Client, user: User,
                     job: JobRow) -> JobControlAccepted:
    """Start items again; 409 unless the job is paused."""
    return await _control(conn, temporal, user, job, BatchJob.resume)


async def _control(conn: asyncpg.Connection, temporal: Client, user: User, job: JobRow,
                   update: Any) -> JobControlAccepted:
    run = await _job_run(conn, job)
    # A group's viewers read jobs; pausing and resuming takes a deciding role.
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "pause or resume jobs")
    if job.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"job {job.id} is already {job.status}")
    result = await execute_update(
        temporal, BATCH.workflow_id(job.run_id), update, PauseInput(requested_by=user.name),
        what="the request",
        ended=ApiError(409, "run_finished", f"job {job.id} is no longer running"))
    return JobControlAccepted(job_id=job.id, status=result.status, in_flight=result.in_flight)


async def _job_run(conn: asyncpg.Connection, job: JobRow) -> RunRow:
    run = await get_run(conn, job.run_id)
    assert run is not None, "a visible job has its run"
    return run
