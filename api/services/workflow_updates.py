"""Requests sent to a run's workflow (Updates, cancellation), and the one mapping of what
Temporal answers to `ApiError`s (`temporal_refusal`, which every service that talks to
Temporal uses): a validator's refusal to its error code, no worker in time or a workflow task
being retried to 503 (send it again), a workflow that has ended to the caller's own 409.
Temporal unreachable, or refusing for a reason no caller can act on, is left to
`waystation.api.errors.as_api_error` (503, 502), which every transport applies to what escapes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from waystation.api.errors import ApiError, unavailable
from waystation.contracts import refusals

# How long an Update may wait for a worker to take it before the caller hears 503.
UPDATE_RPC_TIMEOUT = timedelta(seconds=10)
# Each refusal of an Update's validator or handler: (HTTP status, error code).
REFUSALS = {refusals.UNKNOWN_OPTION: (422, "unknown_option"),
            refusals.GATE_NOT_PENDING: (409, "not_pending"),
            refusals.UNKNOWN_CHECKPOINT: (409, "not_pending"),
            refusals.STALE_REQUEST: (409, "stale_request"),
            refusals.INVALID_FEEDBACK: (422, "invalid_feedback"),
            refusals.INVALID_ANSWER: (422, "invalid_answer"),
            refusals.ALREADY_VOTED: (409, "already_voted"),
            refusals.NOT_ALLOWED: (403, "not_allowed"),
            refusals.INVALID_DELEGATION: (422, "invalid_delegation"),
            refusals.NOT_WAITING_FOR_MESSAGE: (409, "not_waiting_for_message"),
            refusals.JOB_NOT_RUNNING: (409, "job_not_running")}


async def execute_update(temporal: Client, workflow_id: str, update: Any, arg: Any, *,
                         update_id: str | None = None, what: str,
                         ended: ApiError) -> Any:
    """Send `update` (a workflow's Update method) with `arg` and return its result; `ended`
    is raised when the workflow no longer runs. With `update_id`, the same request sent again
    is applied once and answered with the first outcome; `what` names the request in a 503."""
    handle = temporal.get_workflow_handle(workflow_id)
    try:
        return await handle.execute_update(update, arg, id=update_id,
                                           rpc_timeout=UPDATE_RPC_TIMEOUT)
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type in REFUSALS:
            status, code = REFUSALS[cause.type]
            raise ApiError(status, code, cause.message,
                           details=list(cause.details) or None) from error
        raise
    except WorkflowUpdateRPCTimeoutOrCancelledError as error:
        once = " (it will be applied once)" if update_id is not None else ""
        raise unavailable(f"no worker took {what} in time; send it again{once}") from error
    except RPCError as error:
        if (refused := temporal_refusal(error, what=what, ended=ended)) is not None:
            raise refused from error
        raise


async def cancel_workflow(temporal: Client, workflow_id: str, *,
                          ended: ApiError | None) -> None:
    """Ask the workflow to stop; `ended` is raised when it no longer runs (None: a workflow
    that has ended already is what was asked for)."""
    try:
        await temporal.get_workflow_handle(workflow_id).cancel()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND and ended is None:
            return
        if (refused := temporal_refusal(error, what="the cancellation",
                                        ended=ended)) is not None:
            raise refused from error
        raise


def temporal_refusal(error: RPCError, *, what: str,
                     ended: ApiError | None = None) -> ApiError | None:
    """What Temporal's `error` answering `what` means to the caller: 503 (send it again) for
    a run whose workflow task is being retried, `ended` for a workflow that no longer runs;
    None for Temporal unreachable or refusing otherwise, which the caller re-raises for
    `waystation.api.errors.as_api_error` (503, or 502 logged as a bug) to answer on every
    transport."""
    if workflow_not_ready(error):
        return unavailable(f"the run cannot take {what} this instant (its last workflow "
                           "task is being retried); send it again")
    if ended is not None and error.status in (RPCStatusCode.NOT_FOUND,
                                              RPCStatusCode.FAILED_PRECONDITION):
        return ended
    return None


def workflow_not_ready(error: RPCError) -> bool:
    """FAILED_PRECONDITION with a WorkflowNotReadyFailure: the run is alive, but its workflow
    task is being retried (a worker died or timed out holding it), so Temporal refuses updates
    for a moment. Not "ended": the caller should retry."""
    if error.status != RPCStatusCode.FAILED_PRECONDITION:
        return False
    try:
        details = error.grpc_status.details
    except Exception:  # noqa: BLE001 - an undecodable status is simply not this case
        return False
    return any(d.type_url.endswith("WorkflowNotReadyFailure") for d in details)
