"""Repository functions for user contacts and decision links (migration 014)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.persistence.models import Row
from waystation.persistence.queries import sql


class ContactRow(Row):
    user_name: str
    email: str
    updated_at: datetime


class LinkRow(Row):
    id: UUID
    request_id: UUID
    user_name: str
    email: str
    expires_at: datetime
    sent_at: datetime | None
    used_at: datetime | None
    created_at: datetime
    reminded: int = 0


async def put_contact(conn: asyncpg.Connection, user: str, email: str) -> ContactRow:
    return ContactRow.from_record(await conn.fetchrow(sql("put_contact"), user, email))


async def get_contact(conn: asyncpg.Connection, user: str) -> ContactRow | None:
    record = await conn.fetchrow(sql("get_contact"), user)
    return ContactRow.from_record(record) if record else None


async def deciders_with_email(conn: asyncpg.Connection,
                              request_id: UUID) -> list[tuple[str, str]]:
    records = await conn.fetch(sql("deciders_with_email"), request_id)
    return [(r["user_name"], r["email"]) for r in records]


async def upsert_link(conn: asyncpg.Connection, *, link_id: UUID, request_id: UUID, user: str,
                      email: str, expires_at: datetime) -> LinkRow:
    record = await conn.fetchrow(sql("upsert_link"), link_id, request_id, user, email,
                                 expires_at)
    return LinkRow.from_record(record)


async def mark_sent(conn: asyncpg.Connection, link_id: UUID) -> None:
    await conn.execute(sql("mark_link_sent"), link_id)


async def mark_reminded(conn: asyncpg.Connection, link_id: UUID, number: int) -> None:
    await conn.execute(sql("mark_link_reminded"), link_id, number)


async def get_link(conn: asyncpg.Connection, link_id: UUID) -> LinkRow | None:
    record = await conn.fetchrow(sql("get_link"), link_id)
    return LinkRow.from_record(record) if record else None


async def claim_link(conn: asyncpg.Connection, link_id: UUID) -> LinkRow | None:
    record = await conn.fetchrow(sql("claim_link"), link_id)
    return LinkRow.from_record(record) if record else None


async def release_link(conn: asyncpg.Connection, link_id: UUID) -> None:
    await conn.execute(sql("release_link"), link_id)
