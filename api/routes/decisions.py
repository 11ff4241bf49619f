"""Human decisions: the caller's inbox, a run's requests, deciding, and re-opening."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Annotated

import asyncpg
from fastapi import APIRouter, Path, Query
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import User
from api.deps import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    TemporalClient,
    VisibleRun,
    require_decider,
)
from api.errors import ApiError, unavailable
from api.schemas import DecisionList, DecisionRequest, DecisionView
from persistence import gates as gates_repo
from persistence.models import TERMINAL_RUN_STATUSES, GateStatus, RunRow
from workflows import gates as gate_errors
from workflows.agent import NOT_WAITING_FOR_MESSAGE
from workflows.gated import GatedWorkflow
from workflows.gates import DecisionInput, ReopenInput

router = APIRouter(tags=["decisions"])

# How long a decision may wait for a worker to take it before the caller hears 503.
UPDATE_RPC_TIMEOUT = timedelta(seconds=10)
_STATUS_OF_REFUSAL = {gate_errors.UNKNOWN_OPTION: 422, gate_errors.GATE_NOT_PENDING: 409,
                      gate_errors.UNKNOWN_CHECKPOINT: 409, gate_errors.STALE_REQUEST: 409,
                      gate_errors.INVALID_FEEDBACK: 422, gate_errors.INVALID_ARGUMENTS: 422,
                      NOT_WAITING_FOR_MESSAGE: 409}
_CODE_OF_REFUSAL = {gate_errors.UNKNOWN_OPTION: "unknown_option",
                    gate_errors.GATE_NOT_PENDING: "not_pending",
                    gate_errors.UNKNOWN_CHECKPOINT: "not_pending",
                    gate_errors.STALE_REQUEST: "stale_request",
                    gate_errors.INVALID_FEEDBACK: "invalid_feedback",
                    gate_errors.INVALID_ARGUMENTS: "invalid_arguments",
                    NOT_WAITING_FOR_MESSAGE: "not_waiting_for_message"}

Checkpoint = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[a-z0-9_]+$")]


@router.get("/decisions", response_model=DecisionList)
async def inbox(user: CurrentUser, conn: Conn, status: GateStatus | None = "pending",
                limit: Annotated[int, Query(ge=1, le=500)] = 100) -> DecisionList:
    """Decision requests the caller may decide (pending ones by default), newest first: on
    its own runs and on its groups' runs where its role is one the request names."""
    gates = await gates_repo.list_inbox(conn, owner=user.owner_filter, status=status, limit=limit)
    return DecisionList(decisions=[DecisionView.of(g) for g in gates])


@router.get("/runs/{run_id}/decisions", response_model=DecisionList)
async def run_decisions(run: VisibleRun, conn: Conn) -> DecisionList:
    """Every decision request of a run, oldest first, with who decided what and when."""
    gates = await gates_repo.list_run_gates(conn, run.id)
    return DecisionList(decisions=[DecisionView.of(g) for g in gates])


@router.post("/runs/{run_id}/decisions/{checkpoint_name}", response_model=DecisionView)
async def decide(run: VisibleRun, checkpoint_name: Checkpoint, body: DecisionRequest,
                 user: CurrentUser, conn: Conn, temporal: TemporalClient,
                 idempotency_key: IdempotencyKey = None) -> DecisionView:
    """Decide a pending request; 409 when it is not pending, 422 for an unknown option."""
    return await take_decision(conn, temporal, run, checkpoint_name, body, user,
                               idempotency_key=idempotency_key)


async def take_decision(conn: asyncpg.Connection, temporal: Client, run: RunRow,
                        checkpoint_name: str, body: DecisionRequest, user: User, *,
                        idempotency_key: str | None = None) -> DecisionView:
    """Decide as `user` (who must be allowed to), through the run's Update."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    await require_decider(conn, user, run, latest.decider_roles, f"decide {checkpoint_name!r}")
    decision = DecisionInput(checkpoint_name=checkpoint_name, decision=body.decision,
                             feedback=body.feedback, decided_by=user.name,
                             request_id=body.request_id, digest=body.digest,
                             arguments=body.arguments)
    # The same decision sent again carries the same update id, so Temporal applies it once
    # and answers the retry with the first outcome.
    update_id = "decide-" + hashlib.sha256("|".join([
        checkpoint_name, str(latest.id), user.name, body.decision, body.feedback or "",
        idempotency_key or "", json.dumps(body.arguments, sort_keys=True)
        if body.arguments is not None else ""]).encode()).hexdigest()[:32]
    view = await update_workflow(temporal, run, checkpoint_name, lambda h: h.execute_update(
        GatedWorkflow.decide, decision, id=update_id, rpc_timeout=UPDATE_RPC_TIMEOUT))
    decided = await gates_repo.get_gate(conn, view.request_id)
    assert decided is not None, "the workflow records the decision before answering"
    return DecisionView.of(decided)


@router.post("/runs/{run_id}/decisions/{checkpoint_name}/reopen", response_model=DecisionView)
async def reopen(run: VisibleRun, checkpoint_name: Checkpoint, user: CurrentUser, conn: Conn,
                 temporal: TemporalClient) -> DecisionView:
    """Open a fresh request for an expired (or stale pending) checkpoint."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    await require_decider(conn, user, run, latest.decider_roles, f"reopen {checkpoint_name!r}")
    view = await update_workflow(temporal, run, checkpoint_name, lambda h: h.execute_update(
        GatedWorkflow.reopen, ReopenInput(checkpoint_name=checkpoint_name,
                                          requested_by=user.name),
        rpc_timeout=UPDATE_RPC_TIMEOUT))
    opened = await gates_repo.get_gate(conn, view.request_id)
    assert opened is not None
    return DecisionView.of(opened)


async def _checkpoint_request(conn, run: RunRow, checkpoint_name: str):
    latest = await gates_repo.latest_gate_for_checkpoint(conn, run.id, checkpoint_name)
    if latest is None:
        raise ApiError(404, "checkpoint_not_found",
                       f"run {run.id} has no decision request for {checkpoint_name!r}")
    if run.status in TERMINAL_RUN_STATUSES and latest.status == "pending":
        raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
    return latest


async def update_workflow(temporal: TemporalClient, run: RunRow, checkpoint_name: str, call, *,
                          finished: str | None = None):
    """Send an Update to the run's workflow, its refusals mapped to precise 4xx answers and
    its unavailability to 503 (shared with the agent run's messages)."""
    handle = temporal.get_workflow_handle(run.workflow_id)
    try:
        return await call(handle)
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type in _STATUS_OF_REFUSAL:
            raise ApiError(_STATUS_OF_REFUSAL[cause.type], _CODE_OF_REFUSAL[cause.type],
                           cause.message) from error
        raise
    except WorkflowUpdateRPCTimeoutOrCancelledError as error:
        raise unavailable("no worker took the decision in time; send it again "
                          "(it will be applied once)") from error
    except RPCError as error:
        if _workflow_not_ready(error):
            raise unavailable("the run cannot take a decision this instant (its last workflow "
                              "task is being retried); send it again") from error
        if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise ApiError(409, "not_pending", finished or
                           f"checkpoint {checkpoint_name!r} is not pending: the run "
                           "is no longer running") from error
        raise


def _workflow_not_ready(error: RPCError) -> bool:
    """FAILED_PRECONDITION with a WorkflowNotReadyFailure: the run is alive, but its workflow
    task is being retried (a worker died or timed out holding it), so Temporal refuses updates
    for a moment. Not "finished": the caller should retry."""
    if error.status != RPCStatusCode.FAILED_PRECONDITION:
        return False
    try:
        details = error.grpc_status.details
    except Exception:  # noqa: BLE001 - an undecodable status is simply not this case
        return False
    return any(d.type_url.endswith("WorkflowNotReadyFailure") for d in details)
