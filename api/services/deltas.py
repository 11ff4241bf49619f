"""Live model tokens (issue 43): the messages of a run being written now, as `MessageDelta`s.

The one live loop (api/services/live.py) hands on the deltas the event hub hears
(`waystation_deltas`) and, where it starts following or after the hub dropped deltas for a slow
follower, the whole of each message so far (its partial row, as one delta from offset 0), read
over the caller's connection: row-level security shows a run's partials to whoever may read
its events, and nobody else.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from waystation.api.schemas import MessageDelta
from waystation.persistence import deltas as deltas_repo


async def partial_messages(conn: asyncpg.Connection, run_id: UUID) -> list[MessageDelta]:
    """Each message of the run being written, whole so far: its text, then its tool calls'
    arguments, each from offset 0."""
    found: list[MessageDelta] = []
    for row in await deltas_repo.list_message_partials(conn, run_id):
        base = {"run_id": row.run_id, "message_id": row.message_id, "attempt": row.attempt}
        if row.text:
            found.append(MessageDelta(**base, delta=row.text))
        for call_id, call in row.tool_calls.items():
            found.append(MessageDelta(**base, call_id=call_id, tool=call.get("name"),
                                      delta=call.get("args") or ""))
    return found


def beyond(whole: list[MessageDelta], held: list[MessageDelta]) -> list[MessageDelta]:
    """The deltas of `held` that `whole` (the messages as read after they were published, or
    not) lacks: a newer attempt's, and the current attempt's past the end of its whole (each
    row is written with its delta, so a whole ends where some delta ends). A reset of the
    attempt a whole already shows would empty it: left out with the older attempts'."""
    attempts = {d.message_id: d.attempt for d in whole}
    ends = {(d.message_id, d.call_id): len(d.delta) for d in whole}
    return [d for d in held if d.attempt > attempts.get(d.message_id, 0) or (
        d.attempt == attempts[d.message_id] and not d.reset
        and d.at + len(d.delta) > ends.get((d.message_id, d.call_id), 0))]
