"""The batch kind's MCP tools (`ApiHooks.mcp_tools`): a job's progress, its items, and a retry
of its failed items, over the batch service as the REST routes use it."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import Field

from waystation.kinds.batch import service as jobs
from waystation.kinds.batch.schemas import ItemPage, ItemQuery, JobView
from waystation.sdk.mcp import Arguments, Caller, IdempotencyKey, ToolSpec
from waystation.sdk.routes import RunCreated

JobId = Annotated[UUID, Field(description="The batch job's id: the `run_id` of its batch run.")]


class JobRef(Arguments):
    job_id: JobId


class RetryFailedArguments(JobRef):
    idempotency_key: IdempotencyKey = None


class ListItemsArguments(ItemQuery, Arguments):
    job_id: JobId


async def job_progress(caller: Caller, args: JobRef) -> JobView:
    async with caller.conn() as conn:
        return await jobs.job_view(conn, await jobs.visible_job(conn, caller.user, args.job_id))


async def list_items(caller: Caller, args: ListItemsArguments) -> ItemPage:
    async with caller.conn() as conn:
        job = await jobs.visible_job(conn, caller.user, args.job_id)
        return await jobs.list_items(conn, job, args)


async def retry_failed(caller: Caller, args: RetryFailedArguments) -> RunCreated:
    async with caller.conn() as conn:
        job = await jobs.visible_job(conn, caller.user, args.job_id)
        return await jobs.retry_failed(conn, await caller.temporal(), caller.user, job,
                                       settings=caller.settings,
                                       idempotency_key=args.idempotency_key)


def tools() -> list[ToolSpec]:
    return [
        ToolSpec("job_progress", "A batch job's progress: its status, items counted by status, "
                 "cost and tokens, steps.",
                 JobRef, JobView, job_progress),
        ToolSpec("list_items", "A batch job's items in order, optionally only those with "
                 "`status` (pending, running, retrying, completed, failed): payload, result, "
                 "error, retries, path; pass `next_cursor` back as `cursor` to read on.",
                 ListItemsArguments, ItemPage, list_items),
        ToolSpec("retry_failed", "Run the failed items of a finished batch job again, as a new "
                 "job with the same pipeline; returns the new job's `run_id`.",
                 RetryFailedArguments, RunCreated, retry_failed, read_only=False),
    ]
