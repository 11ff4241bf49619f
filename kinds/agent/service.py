"""An agent run's conversation, the kind's `messages` hook: send the next message (an Update
of its workflow), read the transcript, tell whether a run waits for a message. Called through
the core's `waystation.api.services.messages`, which checks who may send and that the run goes
on."""

from __future__ import annotations

import hashlib

import asyncpg
from temporalio.client import Client

from waystation.kinds.agent.contracts import TRANSCRIPT_TYPES
from waystation.kinds.agent.models import MessageInput
from waystation.kinds.agent.workflow import AgentRun
from waystation.sdk import ApiError
from waystation.sdk.reads import RunRow, list_events
from waystation.sdk.routes import (
    MessageAccepted,
    MessagePage,
    MessageRequest,
    RunView,
    TranscriptEntry,
    TranscriptQuery,
)
from waystation.sdk.services import User, execute_update


async def send_message(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                       request: MessageRequest, *,
                       idempotency_key: str | None = None) -> MessageAccepted:
    """The next message, as the run's `post_message` Update; 409 (`not_waiting_for_message`,
    api/services/workflow_updates.py) unless the run waits for one."""
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
    events = await list_events(conn, run.id, after_seq=query.after_seq,
                               limit=query.limit, types=TRANSCRIPT_TYPES)
    return MessagePage(run_id=run.id, context_summary=run.context_summary,
                       messages=[TranscriptEntry.of(e) for e in events],
                       next_after_seq=events[-1].seq if events else query.after_seq)


def waits_for_message(run: RunView) -> bool:
    """Between turns: paused with no request open (see kinds/agent/workflow.py)."""
    return run.status == "paused" and run.pending_checkpoint is None
