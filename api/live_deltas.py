"""The live model tokens a run stream sends (issue 43), for every interface's stream: the
deltas the event hub handed over, and the messages whole so far when a stream starts or when
the hub dropped deltas for it (drop to latest). Each interface maps `MessageDelta` to its wire
format: REST SSE `message.delta` (no `id`: outside the `seq` sequence), AG-UI text-message and
tool-call events, A2A artifact updates, MCP progress.

Sent only where the stream's run events are: after the stream's access check, and partials
read over the caller's own connection (row-level security)."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class Shown:
    """What one client has been sent of the messages being written, so that each delta adds
    only what it lacks: a catch-up repeats a message whole, a late delta of an ended message or
    of a failed attempt adds nothing, and a newer attempt (a retried model request) starts
    over. Keyed by the message id for its text, by the call id for a tool call's arguments."""

    sent: dict[str, int] = field(default_factory=dict)  # key -> characters sent
    attempts: dict[str, int] = field(default_factory=dict)  # message id -> attempt shown
    done: set[str] = field(default_factory=set)  # keys ended by their durable events

    def reset(self, delta: MessageDelta) -> bool:
        """Whether `delta` starts a newer attempt: what was shown of the failed one is to be
        dropped (and is forgotten here)."""
        shown = self.attempts.setdefault(delta.message_id, delta.attempt)
        if delta.attempt <= shown:
            return False
        self.attempts[delta.message_id] = delta.attempt
        self.sent.clear()
        return True

    def new(self, key: str, delta: MessageDelta) -> tuple[bool, str] | None:
        """Whether `key` is new to the client, and the text of `delta` it lacks; None when
        the delta adds nothing (or follows a missing piece: the stream sends the whole again)."""
        if delta.reset or key in self.done \
                or delta.attempt < self.attempts.get(delta.message_id, delta.attempt):
            return None
        self.attempts.setdefault(delta.message_id, delta.attempt)
        have = self.sent.get(key)
        if delta.at > (have or 0):
            return None
        text = delta.delta[(have or 0) - delta.at:]
        self.sent[key] = (have or 0) + len(text)
        return (have is None, text) if text or have is None else None

    def end(self, key: str) -> None:
        self.done.add(key)
        self.sent.pop(key, None)
