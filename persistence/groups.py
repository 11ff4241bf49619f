"""Repository functions for `groups` and `group_members` (migration 012)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from waystation.persistence.db import Conflict
from waystation.persistence.models import GroupRow, MemberRow, RunRow
from waystation.persistence.queries import sql

OWNER = "owner"


class LastOwner(Conflict):
    """The change would leave the group without an owner; nothing was written."""


async def create_group(conn: asyncpg.Connection, *, group_id: UUID, name: str,
                       creator: str) -> GroupRow:
    """A group whose creator is its first owner (one transaction: never a group without one)."""
    async with conn.transaction():
        record = await conn.fetchrow(sql("insert_group"), group_id, name, creator)
        await conn.execute(sql("upsert_member"), group_id, creator, OWNER, creator)
    return GroupRow.model_validate({**dict(record), "role": OWNER})


async def get_group(conn: asyncpg.Connection, group_id: UUID) -> GroupRow | None:
    record = await conn.fetchrow(sql("get_group"), group_id)
    return GroupRow.from_record(record) if record else None


async def list_groups(conn: asyncpg.Connection, user: str | None) -> list[GroupRow]:
    """The user's groups with their role; every group for None (the service role)."""
    return [GroupRow.from_record(r) for r in await conn.fetch(sql("list_member_groups"), user)]


async def list_members(conn: asyncpg.Connection, group_id: UUID) -> list[MemberRow]:
    return [MemberRow.from_record(r) for r in await conn.fetch(sql("list_group_members"),
                                                                group_id)]


async def member_role(conn: asyncpg.Connection, group_id: UUID, user: str) -> str | None:
    return await conn.fetchval(sql("member_role"), group_id, user)


async def member_roles(conn: asyncpg.Connection, user: str) -> dict[UUID, str]:
    """Every group the user is in, with the role."""
    return {r["group_id"]: r["role"] for r in await conn.fetch(sql("member_roles"), user)}


async def put_member(conn: asyncpg.Connection, *, group_id: UUID, user: str, role: str,
                     added_by: str) -> tuple[MemberRow, bool]:
    """Add a member or change its role: (member, added). Raises LastOwner."""
    async with conn.transaction():
        await conn.execute(sql("lock_group"), group_id)
        record = await conn.fetchrow(sql("upsert_member"), group_id, user, role, added_by)
        await _keep_an_owner(conn, group_id)
    fields: dict[str, Any] = dict(record)
    added = bool(fields.pop("inserted"))
    return MemberRow.model_validate(fields), added


async def remove_member(conn: asyncpg.Connection, group_id: UUID, user: str) -> bool:
    """Remove a member: False when there was none. Raises LastOwner."""
    async with conn.transaction():
        await conn.execute(sql("lock_group"), group_id)
        # Counted before the delete: a member that removes itself no longer sees the group's
        # members afterwards (row-level security, migration 022). The lock keeps it exact.
        owners = await conn.fetchval(sql("count_owners"), group_id)
        removed = await conn.fetchrow(sql("delete_member"), group_id, user)
        if removed is not None and removed["role"] == OWNER and owners <= 1:
            raise LastOwner(f"group {group_id} must keep at least one owner")
    return removed is not None


async def _keep_an_owner(conn: asyncpg.Connection, group_id: UUID) -> None:
    # Raised inside the transaction, so the change that left no owner is rolled back.
    if await conn.fetchval(sql("count_owners"), group_id) == 0:
        raise LastOwner(f"group {group_id} must keep at least one owner")


async def list_group_runs(conn: asyncpg.Connection, group_id: UUID, *, status: str | None,
                          limit: int) -> list[RunRow]:
    records = await conn.fetch(sql("list_group_runs"), group_id, status, limit)
    return [RunRow.from_record(r) for r in records]
