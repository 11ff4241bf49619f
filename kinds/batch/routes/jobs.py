"""Batch jobs: the job view with counts and cost, its items, pause / resume, and retrying the
failed items of a finished job.

A job's id is its run's id. A job belongs to its run's owner: another user's job answers 404,
exactly like another user's run. Cancelling goes through POST /runs/{id}/cancel.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from waystation.kinds.batch import service as jobs
from waystation.kinds.batch.repository import JobRow
from waystation.kinds.batch.routes import StepName
from waystation.kinds.batch.schemas import (
    ItemPage,
    ItemQuery,
    JobControlAccepted,
    JobView,
    OrdinalPage,
    RerunRequest,
    StepOutputPage,
)
from waystation.sdk.routes import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    RunCreated,
    SettingsDep,
    TemporalClient,
)

router = APIRouter(prefix="/jobs", tags=["jobs"])


async def get_visible_job(job_id: UUID, user: CurrentUser, conn: Conn) -> JobRow:
    """The job, if the caller may see its run; otherwise indistinguishable from none."""
    return await jobs.visible_job(conn, user, job_id)


VisibleJob = Annotated[JobRow, Depends(get_visible_job)]


@router.get("/{job_id}", response_model=JobView)
async def get_job(job: VisibleJob, conn: Conn) -> JobView:
    """The job with its items counted by status, and cost and token totals."""
    return await jobs.job_view(conn, job)


@router.get("/{job_id}/items", response_model=ItemPage)
async def list_items(job: VisibleJob, conn: Conn,
                     query: Annotated[ItemQuery, Query()]) -> ItemPage:
    """The job's items in ordinal order, filtered by status and by the step they stand at;
    `cursor` reads on."""
    return await jobs.list_items(conn, job, query)


@router.get("/{job_id}/steps/{step}/outputs", response_model=StepOutputPage)
async def list_step_outputs(job: VisibleJob, step: StepName, conn: Conn,
                            query: Annotated[OrdinalPage, Query()]) -> StepOutputPage:
    """One step's outputs across the job, in item order; `cursor` reads on."""
    return await jobs.step_outputs(conn, job, step, query)


@router.post("/{job_id}/retry-failed", status_code=201, response_model=RunCreated)
async def retry_failed_items(job: VisibleJob, user: CurrentUser, conn: Conn,
                             temporal: TemporalClient, settings: SettingsDep,
                             response: Response,
                             idempotency_key: IdempotencyKey = None) -> RunCreated:
    """Run the failed items of a finished job again, as a new job with the same pipeline;
    409 while the job runs or when none failed. The finished job keeps its final status."""
    created = await jobs.retry_failed(conn, temporal, user, job, settings=settings,
                                      idempotency_key=idempotency_key)
    if not created.created:
        response.headers["Idempotent-Replayed"] = "true"
    return created


@router.post("/{job_id}/rerun", status_code=201, response_model=RunCreated)
async def rerun_items(job: VisibleJob, body: RerunRequest, user: CurrentUser, conn: Conn,
                      temporal: TemporalClient, settings: SettingsDep, response: Response,
                      idempotency_key: IdempotencyKey = None) -> RunCreated:
    """Run chosen items of a finished job (default: all) again from a chosen step, as a new
    job whose items keep their outputs of the steps before it."""
    created = await jobs.rerun_items(conn, temporal, user, job, body, settings=settings,
                                     idempotency_key=idempotency_key)
    if not created.created:
        response.headers["Idempotent-Replayed"] = "true"
    return created


@router.post("/{job_id}/pause", status_code=202, response_model=JobControlAccepted)
async def pause_job(job: VisibleJob, user: CurrentUser, conn: Conn,
                    temporal: TemporalClient) -> JobControlAccepted:
    """Stop starting items (those in flight finish); 409 unless the job is running."""
    return await jobs.pause_job(conn, temporal, user, job)


@router.post("/{job_id}/resume", status_code=202, response_model=JobControlAccepted)
async def resume_job(job: VisibleJob, user: CurrentUser, conn: Conn,
                     temporal: TemporalClient) -> JobControlAccepted:
    """Start items again; 409 unless the job is paused."""
    return await jobs.resume_job(conn, temporal, user, job)
