"""A run's conversation, for a run of a kind that takes follow-up messages (`ApiHooks.messages`):
send the next message, read the transcript, tell whether it waits for a message. The REST
route, AG-UI, A2A and MCP all call these; the kind's hook does its own part."""

from __future__ import annotations

import asyncpg
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.queries import TranscriptQuery
from waystation.api.schemas import MessageAccepted, MessagePage, MessageRequest, RunView
from waystation.api.services.access import require_decider
from waystation.contracts.kinds import KindMessages
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES
from waystation.persistence.models import TERMINAL_RUN_STATUSES, RunRow
from waystation.registry import Registry


async def send_message(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                       request: MessageRequest, *, registry: Registry,
                       idempotency_key: str | None = None) -> MessageAccepted:
    """The next message of a conversation; 409 unless the run waits for one."""
    # Any member who may decide the run's gates may talk to it; viewers only read (seed 003).
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "send messages")
    conversation = registry.messages(run.kind)
    if conversation is None:
        raise ApiError(409, "not_waiting_for_message",
                       f"run {run.id} is a {run.kind} run, whose kind takes no messages")
    if run.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
    accepted: MessageAccepted = await conversation.send(
        conn, temporal, user, run, request, idempotency_key=idempotency_key)
    return accepted


async def transcript(conn: asyncpg.Connection, run: RunRow, query: TranscriptQuery, *,
                     registry: Registry) -> MessagePage:
    """The conversation so far (none for a run of a kind that takes no messages)."""
    conversation = registry.messages(run.kind)
    if conversation is None:
        return MessagePage(run_id=run.id, context_summary=run.context_summary, messages=[],
                           next_after_seq=query.after_seq)
    page: MessagePage = await conversation.transcript(conn, run, query)
    return page


def waits_for_message(run: RunView, *, registry: Registry) -> bool:
    """Whether the run waits for its next message now."""
    conversation: KindMessages | None = registry.messages(run.kind)
    return conversation is not None and conversation.waiting(run)
