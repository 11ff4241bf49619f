"""An agent run's conversation: send the next message, read the transcript."""

from __future__ import annotations

import hashlib

import asyncpg
from temporalio.client import Client

from api.auth import User
from api.errors import ApiError
from api.queries import TranscriptQuery
from api.schemas import MessageAccepted, MessagePage, MessageRequest, TranscriptEntry
from api.services.access import require_decider
from api.services.workflow_updates import execute_update
from contracts.agents import TRANSCRIPT_TYPES
from contracts.writes import DEFAULT_DECIDER_ROLES
from persistence import events as events_repo
from persistence.models import TERMINAL_RUN_STATUSES, RunRow
from workflows.agent import AgentRun
from workflows.agent_kind import AGENT
from workflows.agent_models import MessageInput


async def send_message(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                       request: MessageRequest, *,
                       idempotency_key: str | None = None) -> MessageAccepted:
    """The next message of a conversation; 409 unless the run waits for one."""
    # Any member who may decide the run's gates may talk to it; viewers only read (seed 003).
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "send messages")
    if run.kind != AGENT.name:
        raise ApiError(409, "not_waiting_for_message",
                       f"run {run.id} is a {run.kind} run; only agent runs take messages")
    if run.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
    # With an idempotency key, a resent message carries the same update id: applied once.
    update_id = None
    if idempotency_key is not None:
        update_id = "message-" + hashlib.sha256(
            f"{user.name}|{idempotency_key}|{request.text}".encode()).hexdigest()[:32]
    accepted = await execute_update(
        temporal, run.workflow_id, AgentRun.post_message,
        MessageInput(text=request.text, sent_by=user.name), update_id=update_id,
        what="the message",
        ended=ApiError(409, "not_pending", f"run {run.id} is no longer running"))
    return MessageAccepted(run_id=run.id, number=accepted.number, turn=accepted.turn)


async def transcript(conn: asyncpg.Connection, run: RunRow,
                     query: TranscriptQuery) -> MessagePage:
    """The conversation so far: messages, tool calls and their results, the agent's answers."""
    events = await events_repo.list_events(conn, run.id, after_seq=query.after_seq,
                                           limit=query.limit, types=TRANSCRIPT_TYPES)
    return MessagePage(run_id=run.id, context_summary=run.context_summary,
                       messages=[TranscriptEntry.of(e) for e in events],
                       next_after_seq=events[-1].seq if events else query.after_seq)
