"""The live model tokens a run stream sends (issue 43), for every interface's stream: the
deltas the event hub handed over, and the messages whole so far when a stream starts or when
the hub dropped deltas for it (drop to latest). Each interface maps `MessageDelta` to its wire
format: REST SSE `message.delta` (no `id`: outside the `seq` sequence), AG-UI text-message and
tool-call events, A2A artifact updates, MCP progress.

Sent only where the stream's run events are: after the stream's access check, and partials
read over the caller's own connection (row-level security)."""

from __future__ import annotations

import asyncpg

from api.event_hub import RunSubscription
from api.schemas import MessageDelta
from api.services import deltas as deltas_service
from api.sse import sse
from persistence.claims import Claims, claimed_connection

DELTA_EVENT = "message.delta"


async def joined(pool: asyncpg.Pool, claims: Claims, sub: RunSubscription) -> list[MessageDelta]:
    """What a stream starting now shows of the messages being written: each whole so far
    (the deltas the hub holds for it then start where they start; a client drops what it has)."""
    sub.take_deltas()
    async with claimed_connection(pool, claims) as conn:
        return await deltas_service.partial_messages(conn, sub.run_id)


async def taken(pool: asyncpg.Pool, claims: Claims, sub: RunSubscription) -> list[MessageDelta]:
    """The deltas waiting for the stream; after each message whole so far when some were
    dropped."""
    deltas, dropped = sub.take_deltas()
    if not dropped:
        return deltas
    async with claimed_connection(pool, claims) as conn:
        return [*await deltas_service.partial_messages(conn, sub.run_id), *deltas]


def sse_frames(deltas: list[MessageDelta]) -> bytes:
    return b"".join(sse(DELTA_EVENT, d.model_dump(mode="json")) for d in deltas)
