"""An agent run's conversation: send the next message, read the transcript."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    TemporalClient,
    VisibleRun,
    require_decider,
)
from api.errors import ApiError
from api.routes.decisions import UPDATE_RPC_TIMEOUT, update_workflow
from api.schemas import MessageAccepted, MessagePage, MessageRequest, TranscriptEntry
from contracts.agents import TRANSCRIPT_TYPES
from contracts.writes import DEFAULT_DECIDER_ROLES
from persistence import events as events_repo
from persistence.models import TERMINAL_RUN_STATUSES
from workflows.agent import AgentRun
from workflows.agent_kind import AGENT
from workflows.agent_models import MessageInput

router = APIRouter(prefix="/runs", tags=["messages"])

@router.post("/{run_id}/messages", status_code=202, response_model=MessageAccepted)
async def post_message(run: VisibleRun, body: MessageRequest, user: CurrentUser,
                       conn: Conn, temporal: TemporalClient,
                       idempotency_key: IdempotencyKey = None) -> MessageAccepted:
    """The next message of a conversation; 409 unless the run waits for one."""
    # Any member who may decide the run's gates may talk to it; viewers only read (seed 003).
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "send messages")
    if run.kind != AGENT.name:
        raise ApiError(409, "not_waiting_for_message",
                       f"run {run.id} is a {run.kind} run; only agent runs take messages")
    if run.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
    # With an Idempotency-Key, a resent message carries the same update id: applied once.
    update_id = None
    if idempotency_key is not None:
        update_id = "message-" + hashlib.sha256(
            f"{user.name}|{idempotency_key}|{body.text}".encode()).hexdigest()[:32]
    accepted = await update_workflow(
        temporal, run, "message", lambda handle: handle.execute_update(
            AgentRun.post_message, MessageInput(text=body.text, sent_by=user.name),
            id=update_id, rpc_timeout=UPDATE_RPC_TIMEOUT),
        finished=f"run {run.id} is no longer running")
    return MessageAccepted(run_id=run.id, number=accepted.number, turn=accepted.turn)


@router.get("/{run_id}/messages", response_model=MessagePage)
async def list_messages(
    run: VisibleRun, conn: Conn,
    after_seq: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> MessagePage:
    """The conversation so far: messages, tool calls and their results, the agent's answers."""
    events = await events_repo.list_events(conn, run.id, after_seq=after_seq, limit=limit,
                                           types=TRANSCRIPT_TYPES)
    return MessagePage(run_id=run.id, context_summary=run.context_summary,
                       messages=[TranscriptEntry.of(e) for e in events],
                       next_after_seq=events[-1].seq if events else after_seq)
