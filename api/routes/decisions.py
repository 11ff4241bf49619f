"""Human decisions: the caller's inbox, a run's requests, deciding, and re-opening."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Annotated
from uuid import UUID

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
from api.schemas import DecisionList, DecisionRequest, DecisionView, DelegationRequest
from persistence import gates as gates_repo
from persistence import groups as groups_repo
from persistence.models import TERMINAL_RUN_STATUSES, GateRow, GateStatus, RunRow
from workflows import gates as gate_errors
from workflows.agent import NOT_WAITING_FOR_MESSAGE
from workflows.gated import GatedWorkflow
from workflows.gates import DecisionInput, DelegateInput, ReopenInput

router = APIRouter(tags=["decisions"])

# How long a decision may wait for a worker to take it before the caller hears 503.
UPDATE_RPC_TIMEOUT = timedelta(seconds=10)
# Each refusal of a gate's validator: (HTTP status, error code).
_REFUSALS = {gate_errors.UNKNOWN_OPTION: (422, "unknown_option"),
             gate_errors.GATE_NOT_PENDING: (409, "not_pending"),
             gate_errors.UNKNOWN_CHECKPOINT: (409, "not_pending"),
             gate_errors.STALE_REQUEST: (409, "stale_request"),
             gate_errors.INVALID_FEEDBACK: (422, "invalid_feedback"),
             gate_errors.INVALID_ANSWER: (422, "invalid_answer"),
             gate_errors.ALREADY_VOTED: (409, "already_voted"),
             gate_errors.NOT_ALLOWED: (403, "not_allowed"),
             gate_errors.INVALID_DELEGATION: (422, "invalid_delegation"),
             NOT_WAITING_FOR_MESSAGE: (409, "not_waiting_for_message")}

Checkpoint = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[a-z0-9_]+$")]


@router.get("/decisions", response_model=DecisionList)
async def inbox(user: CurrentUser, conn: Conn, status: GateStatus | None = "pending",
                limit: Annotated[int, Query(ge=1, le=500)] = 100) -> DecisionList:
    """Decision requests the caller may decide (pending ones by default), newest first: on
    its own runs and on its groups' runs where its role is one the request names."""
    gates = await gates_repo.list_inbox(conn, owner=user.owner_filter, status=status, limit=limit)
    return DecisionList(decisions=await decision_views(conn, gates))


@router.get("/runs/{run_id}/decisions", response_model=DecisionList)
async def run_decisions(run: VisibleRun, conn: Conn) -> DecisionList:
    """Every decision request of a run, oldest first, with who decided what and when."""
    gates = await gates_repo.list_run_gates(conn, run.id)
    return DecisionList(decisions=await decision_views(conn, gates))


async def decision_views(conn: asyncpg.Connection, gates: list[GateRow]) -> list[DecisionView]:
    """The requests with their votes and delegations (one query however many)."""
    audits = await gates_repo.list_audits(conn, [g.id for g in gates]) if gates else {}
    return [DecisionView.of(g, audits.get(g.id)) for g in gates]


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
    """Vote as `user` (who must be allowed to), through the run's Update; the request is
    decided by this vote unless it waits for more (a quorum)."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    for_self = await _may_vote(conn, user, run, latest, f"decide {checkpoint_name!r}")
    decision = DecisionInput(checkpoint_name=checkpoint_name, decision=body.decision,
                             feedback=body.feedback, decided_by=user.name,
                             request_id=body.request_id, digest=body.digest,
                             answer=body.answer, for_self=for_self)
    update_id = _update_id(
        "decide", checkpoint_name, str(latest.id), user.name, body.decision,
        body.feedback or "", idempotency_key or "",
        json.dumps(body.answer, sort_keys=True) if body.answer is not None else "")
    view = await update_workflow(temporal, run, checkpoint_name, lambda h: h.execute_update(
        GatedWorkflow.decide, decision, id=update_id, rpc_timeout=UPDATE_RPC_TIMEOUT))
    return await _request_view(conn, view.request_id)


@router.post("/runs/{run_id}/decisions/{checkpoint_name}/delegate", response_model=DecisionView)
async def delegate(run: VisibleRun, checkpoint_name: Checkpoint, body: DelegationRequest,
                   user: CurrentUser, conn: Conn, temporal: TemporalClient) -> DecisionView:
    """Hand your vote on a pending request to another member of the run's group (or its
    owner), who then casts it; 404 for someone who is neither, 409 once you have voted or
    handed it to someone else (the same delegation sent again answers 200)."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    await _may_vote(conn, user, run, latest, f"delegate on {checkpoint_name!r}")
    if body.to != run.owner and (run.group_id is None or await groups_repo.member_role(
            conn, run.group_id, body.to) is None):
        raise ApiError(404, "member_not_found",
                       f"{body.to!r} is neither the run's owner nor a member of its group")
    handed = DelegateInput(checkpoint_name=checkpoint_name, from_user=user.name,
                           to_user=body.to, request_id=body.request_id)
    update_id = _update_id("delegate", checkpoint_name, str(latest.id), user.name, body.to)
    view = await update_workflow(temporal, run, checkpoint_name, lambda h: h.execute_update(
        GatedWorkflow.delegate, handed, id=update_id, rpc_timeout=UPDATE_RPC_TIMEOUT))
    return await _request_view(conn, view.request_id)


def _update_id(what: str, *request: str) -> str:
    """The Update's id for `request`: the same request sent again carries the same id, so
    Temporal applies it once and answers the retry with the first outcome."""
    return f"{what}-" + hashlib.sha256("|".join(request).encode()).hexdigest()[:32]


async def _may_vote(conn: asyncpg.Connection, user: User, run: RunRow, gate: GateRow,
                    action: str) -> bool:
    """Whether `user` votes for themselves (True) or only with votes handed to them (False);
    403 naming the rule when neither."""
    if user.name in gate.decider_users:
        return True
    try:
        await require_decider(conn, user, run, gate.decider_roles, action)
        return True
    except ApiError:
        if gate.status == "pending" and await gates_repo.delegated_to(conn, gate.id, user.name):
            return False
        raise


async def _request_view(conn: asyncpg.Connection, request_id: UUID) -> DecisionView:
    gate = await gates_repo.get_gate(conn, request_id)
    assert gate is not None, "the workflow records a request before answering"
    return (await decision_views(conn, [gate]))[0]


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
    return await _request_view(conn, view.request_id)


async def _checkpoint_request(conn: asyncpg.Connection, run: RunRow,
                              checkpoint_name: str) -> GateRow:
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
        if isinstance(cause, ApplicationError) and cause.type in _REFUSALS:
            status, code = _REFUSALS[cause.type]
            raise ApiError(status, code, cause.message,
                           details=list(cause.details) or None) from error
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
