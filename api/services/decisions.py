"""Human decisions: the caller's inbox, a run's requests, voting, handing a vote on, and
re-opening an expired request. A vote goes to the run's workflow as an Update, so every
refusal comes from the one gate mechanism (workflows/gate_handlers.py)."""

from __future__ import annotations

import hashlib
import json
from uuid import UUID

import asyncpg
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.queries import InboxQuery
from waystation.api.schemas import DecisionList, DecisionRequest, DecisionView, DelegationRequest
from waystation.api.services.access import require_decider
from waystation.api.services.workflow_updates import execute_update
from waystation.persistence import gates as gates_repo
from waystation.persistence import groups as groups_repo
from waystation.persistence.models import TERMINAL_RUN_STATUSES, GateRow, RunRow
from waystation.workflows.gate_handlers import GatedWorkflow
from waystation.workflows.gate_rules import DecisionInput, DelegateInput, ReopenInput


async def inbox(conn: asyncpg.Connection, user: User, query: InboxQuery) -> DecisionList:
    """Decision requests the caller may decide (pending ones by default), newest first: on
    its own runs and on its groups' runs where its role is one the request names."""
    gates = await gates_repo.list_inbox(conn, owner=user.owner_filter, status=query.status,
                                        limit=query.limit)
    return DecisionList(decisions=await decision_views(conn, gates))


async def run_decisions(conn: asyncpg.Connection, run: RunRow) -> DecisionList:
    """Every decision request of a run, oldest first, with who decided what and when."""
    gates = await gates_repo.list_run_gates(conn, run.id)
    return DecisionList(decisions=await decision_views(conn, gates))


async def decision_views(conn: asyncpg.Connection, gates: list[GateRow]) -> list[DecisionView]:
    """The requests with their votes and delegations (one query however many)."""
    audits = await gates_repo.list_audits(conn, [g.id for g in gates]) if gates else {}
    return [DecisionView.of(g, audits.get(g.id)) for g in gates]


async def decide(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                 checkpoint_name: str, request: DecisionRequest, *,
                 idempotency_key: str | None = None) -> DecisionView:
    """Vote as `user` (who must be allowed to), through the run's Update; the request is
    decided by this vote unless it waits for more (a quorum). 409 when it is not pending,
    422 for an unknown option."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    for_self = await _may_vote(conn, user, run, latest, f"decide {checkpoint_name!r}")
    decision = DecisionInput(checkpoint_name=checkpoint_name, decision=request.decision,
                             feedback=request.feedback, decided_by=user.name,
                             request_id=request.request_id, digest=request.digest,
                             answer=request.answer, for_self=for_self)
    update_id = _update_id(
        "decide", checkpoint_name, str(latest.id), user.name, request.decision,
        request.feedback or "", idempotency_key or "",
        json.dumps(request.answer, sort_keys=True) if request.answer is not None else "")
    view = await execute_update(temporal, run.workflow_id, GatedWorkflow.decide, decision,
                                update_id=update_id, what="the decision",
                                ended=_not_pending(checkpoint_name))
    return await _request_view(conn, view.request_id)


async def delegate(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                   checkpoint_name: str, request: DelegationRequest) -> DecisionView:
    """Hand your vote on a pending request to another member of the run's group (or its
    owner), who then casts it; 404 for someone who is neither, 409 once you have voted or
    handed it to someone else (the same delegation sent again answers as the first)."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    await _may_vote(conn, user, run, latest, f"delegate on {checkpoint_name!r}")
    if request.to != run.owner and (run.group_id is None or await groups_repo.member_role(
            conn, run.group_id, request.to) is None):
        raise ApiError(404, "member_not_found",
                       f"{request.to!r} is neither the run's owner nor a member of its group")
    handed = DelegateInput(checkpoint_name=checkpoint_name, from_user=user.name,
                           to_user=request.to, request_id=request.request_id)
    update_id = _update_id("delegate", checkpoint_name, str(latest.id), user.name, request.to)
    view = await execute_update(temporal, run.workflow_id, GatedWorkflow.delegate, handed,
                                update_id=update_id, what="the delegation",
                                ended=_not_pending(checkpoint_name))
    return await _request_view(conn, view.request_id)


async def reopen(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                 checkpoint_name: str) -> DecisionView:
    """Open a fresh request for an expired (or stale pending) checkpoint."""
    latest = await _checkpoint_request(conn, run, checkpoint_name)
    await require_decider(conn, user, run, latest.decider_roles, f"reopen {checkpoint_name!r}")
    view = await execute_update(
        temporal, run.workflow_id, GatedWorkflow.reopen,
        ReopenInput(checkpoint_name=checkpoint_name, requested_by=user.name),
        what="the request", ended=_not_pending(checkpoint_name))
    return await _request_view(conn, view.request_id)


async def require_voter(conn: asyncpg.Connection, user: User, run: RunRow, gate: GateRow,
                        action: str) -> None:
    """403 naming the rule unless `user` may vote on `gate` (for themselves, or with votes
    handed to them): asked before offering a form that would end in a vote (a Slack modal)."""
    await _may_vote(conn, user, run, gate, action)


def _update_id(what: str, *request: str) -> str:
    """The Update's id for `request`: the same request sent again carries the same id, so
    Temporal applies it once and answers the retry with the first outcome."""
    return f"{what}-" + hashlib.sha256("|".join(request).encode()).hexdigest()[:32]


def _not_pending(checkpoint_name: str) -> ApiError:
    return ApiError(409, "not_pending", f"checkpoint {checkpoint_name!r} is not pending: the "
                                        "run is no longer running")


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


async def _checkpoint_request(conn: asyncpg.Connection, run: RunRow,
                              checkpoint_name: str) -> GateRow:
    latest = await gates_repo.latest_gate_for_checkpoint(conn, run.id, checkpoint_name)
    if latest is None:
        raise ApiError(404, "checkpoint_not_found",
                       f"run {run.id} has no decision request for {checkpoint_name!r}")
    if run.status in TERMINAL_RUN_STATUSES and latest.status == "pending":
        raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
    return latest
