"""Repository functions for `hitl_requests` (writes go through waystation.persistence.writes)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from waystation.persistence.models import GateAudit, GateRow
from waystation.persistence.queries import sql


async def get_gate(conn: asyncpg.Connection, gate_id: UUID) -> GateRow | None:
    record = await conn.fetchrow(sql("get_gate"), gate_id)
    return GateRow.from_record(record) if record else None


async def list_run_gates(conn: asyncpg.Connection, run_id: UUID) -> list[GateRow]:
    return [GateRow.from_record(r) for r in await conn.fetch(sql("list_run_gates"), run_id)]


async def latest_gate_for_checkpoint(
    conn: asyncpg.Connection, run_id: UUID, checkpoint_name: str
) -> GateRow | None:
    record = await conn.fetchrow(sql("latest_gate_for_checkpoint"), run_id, checkpoint_name)
    return GateRow.from_record(record) if record else None


async def list_inbox(
    conn: asyncpg.Connection, *, owner: str | None, status: str | None, limit: int
) -> list[GateRow]:
    records = await conn.fetch(sql("list_inbox"), owner, status, limit)
    return [GateRow.from_record(r) for r in records]


async def list_audits(conn: asyncpg.Connection,
                      request_ids: list[UUID]) -> dict[UUID, GateAudit]:
    """The votes and delegations of each request."""
    records = await conn.fetch(sql("list_gate_audits"), request_ids)
    return {r["request_id"]: GateAudit.model_validate(dict(r)) for r in records}


async def delegated_to(conn: asyncpg.Connection, request_id: UUID, user: str) -> list[str]:
    """Whose votes on the request were handed to `user`."""
    return [r["from_user"] for r in await conn.fetch(sql("delegated_to"), request_id, user)]
