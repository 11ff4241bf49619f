"""Repository functions for `message_partials` (migration 080): the messages of a run being
written now. Deltas are written by `publish_message_delta` (activities/deltas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from waystation.persistence.models import Row
from waystation.persistence.queries import sql


class MessagePartialRow(Row):
    run_id: UUID
    message_id: str
    attempt: int
    text: str
    tool_calls: dict[str, Any]
    updated_at: datetime


async def list_message_partials(conn: asyncpg.Connection,
                                run_id: UUID) -> list[MessagePartialRow]:
    return [MessagePartialRow.from_record(r)
            for r in await conn.fetch(sql("list_message_partials"), run_id)]
