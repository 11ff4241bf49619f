"""An agent run's conversation: send the next message, read the transcript (the kind's
`routers` hook; through the core's service for runs that take messages)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from waystation.sdk.routes import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    MessageAccepted,
    MessagePage,
    MessageRequest,
    RegistryDep,
    TemporalClient,
    TranscriptQuery,
    VisibleRun,
)
from waystation.sdk.services import send_message, transcript

router = APIRouter(prefix="/runs", tags=["messages"])


@router.post("/{run_id}/messages", status_code=202, response_model=MessageAccepted)
async def post_message(run: VisibleRun, body: MessageRequest, user: CurrentUser,
                       conn: Conn, temporal: TemporalClient, registry: RegistryDep,
                       idempotency_key: IdempotencyKey = None) -> MessageAccepted:
    """The next message of a conversation; 409 unless the run waits for one."""
    return await send_message(conn, temporal, user, run, body, registry=registry,
                              idempotency_key=idempotency_key)


@router.get("/{run_id}/messages", response_model=MessagePage)
async def list_messages(run: VisibleRun, conn: Conn, registry: RegistryDep,
                        query: Annotated[TranscriptQuery, Query()]) -> MessagePage:
    """The conversation so far: messages, tool calls and their results, the agent's answers."""
    return await transcript(conn, run, query, registry=registry)
