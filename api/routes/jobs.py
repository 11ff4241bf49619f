"""Batch jobs: the job view with counts and cost, its items, pause / resume, and retrying the
failed items of a finished job.

A job's id is its run's id. A job belongs to its run's owner: another user's job answers 404,
exactly like another user's run. Cancelling goes through POST /runs/{id}/cancel.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import User
from api.deps import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    SettingsDep,
    TemporalClient,
    may_read,
    require_decider,
    require_run_starter,
)
from api.errors import ApiError, unavailable
from api.job_schemas import ItemPage, ItemView, JobControlAccepted, JobView, UnitStatus
from api.run_kinds import create_and_start
from api.schemas import RunCreated
from contracts.writes import DEFAULT_DECIDER_ROLES
from persistence import jobs as jobs_repo
from persistence import runs as runs_repo
from persistence.jobs import JobRow
from persistence.models import TERMINAL_RUN_STATUSES
from workflows.batch import JOB_NOT_RUNNING, BatchJob
from workflows.batch_kind import BATCH
from workflows.batch_models import BatchInput, PauseInput

router = APIRouter(prefix="/jobs", tags=["jobs"])

UPDATE_RPC_TIMEOUT = timedelta(seconds=10)


async def get_visible_job(job_id: UUID, user: CurrentUser, conn: Conn) -> JobRow:
    """The job, if the caller may see its run; otherwise indistinguishable from none."""
    job = await jobs_repo.get_job(conn, job_id)
    run = await runs_repo.get_run(conn, job.run_id) if job else None
    if job is None or run is None or not await may_read(conn, user, run):
        raise ApiError(404, "job_not_found", f"job {job_id} not found")
    return job


VisibleJob = Annotated[JobRow, Depends(get_visible_job)]


@router.get("/{job_id}", response_model=JobView)
async def get_job(job: VisibleJob, conn: Conn) -> JobView:
    """The job with its items counted by status, and cost and token totals."""
    return JobView.of(job, await jobs_repo.unit_counts(conn, job.id))


@router.get("/{job_id}/items", response_model=ItemPage)
async def list_items(
    job: VisibleJob, conn: Conn, status: UnitStatus | None = None,
    cursor: Annotated[str | None, Query(pattern=r"^\d{1,10}$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> ItemPage:
    """The job's items in ordinal order, filtered by status; `cursor` reads on."""
    after = int(cursor) if cursor is not None else -1
    # Ordinals are 32-bit; a cursor past them (the pattern lets ten digits through) is past
    # every item.
    units = await jobs_repo.list_units(conn, job.id, status=status, after_ordinal=after,
                                       limit=limit + 1) if after < 2**31 - 1 else []
    page, more = units[:limit], len(units) > limit
    return ItemPage(items=[ItemView.of(u) for u in page],
                    next_cursor=str(page[-1].ordinal) if more else None)


@router.post("/{job_id}/retry-failed", status_code=201, response_model=RunCreated)
async def retry_failed_items(job: VisibleJob, user: CurrentUser, conn: Conn,
                             temporal: TemporalClient, settings: SettingsDep,
                             response: Response,
                             idempotency_key: IdempotencyKey = None) -> RunCreated:
    """Run the failed items of a finished job again, as a new job with the same pipeline;
    409 while the job runs or when none failed. The finished job keeps its final status."""
    if job.status not in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "job_not_finished", f"job {job.id} is {job.status}; retry its "
                                                "failed items once it has finished")
    payloads = await jobs_repo.failed_payloads(conn, job.id)
    if not payloads:
        raise ApiError(409, "no_failed_items", f"job {job.id} has no failed items")
    source = await runs_repo.get_run(conn, job.run_id)
    assert source is not None, "a visible job has its run"
    spec = {k: v for k, v in source.input.items() if k not in ("items", "items_path")}
    retry = BatchInput.model_validate({**spec, "items": payloads, "retry_of": job.id,
                                       "name": f"{job.name} (retry)"[:200]})
    if source.group_id is not None:
        await require_run_starter(conn, user, source.group_id)
    run, created = await create_and_start(
        conn, temporal, settings.temporal_task_queue, BATCH, owner=user.name, input=retry,
        project_id=source.project_id, idempotency_key=idempotency_key,
        group_id=source.group_id)
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return RunCreated.of(run, created)


@router.post("/{job_id}/pause", status_code=202, response_model=JobControlAccepted)
async def pause_job(job: VisibleJob, user: CurrentUser, conn: Conn,
                    temporal: TemporalClient) -> JobControlAccepted:
    """Stop starting items (those in flight finish); 409 unless the job is running."""
    return await _control(conn, temporal, job, user, BatchJob.pause,
                          PauseInput(requested_by=user.name))


@router.post("/{job_id}/resume", status_code=202, response_model=JobControlAccepted)
async def resume_job(job: VisibleJob, user: CurrentUser, conn: Conn,
                     temporal: TemporalClient) -> JobControlAccepted:
    """Start items again; 409 unless the job is paused."""
    return await _control(conn, temporal, job, user, BatchJob.resume,
                          PauseInput(requested_by=user.name))


async def _control(conn: Conn, temporal: TemporalClient, job: JobRow, user: User, update,
                   request: PauseInput) -> JobControlAccepted:
    run = await runs_repo.get_run(conn, job.run_id)
    assert run is not None, "a visible job has its run"
    # A group's viewers read jobs; pausing and resuming takes a deciding role.
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "pause or resume jobs")
    if job.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"job {job.id} is already {job.status}")
    handle = temporal.get_workflow_handle(BATCH.workflow_id(job.run_id))
    try:
        result = await handle.execute_update(update, request, rpc_timeout=UPDATE_RPC_TIMEOUT)
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type == JOB_NOT_RUNNING:
            raise ApiError(409, "job_not_running", cause.message) from error
        raise
    except WorkflowUpdateRPCTimeoutOrCancelledError as error:
        raise unavailable("no worker took the request in time; send it again") from error
    except RPCError as error:
        if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise ApiError(409, "run_finished", f"job {job.id} is no longer running") from error
        raise
    return JobControlAccepted(job_id=job.id, status=result.status, in_flight=result.in_flight)
