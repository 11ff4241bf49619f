"""Repository functions for `api_keys` (migration 015)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.persistence.db import Conflict
from waystation.persistence.groups import remove_member
from waystation.persistence.models import Row
from waystation.persistence.queries import sql

PRINCIPAL_PREFIX = "apikey:"


class ApiKeyRow(Row):
    id: UUID
    name: str
    owner: str
    group_id: UUID | None
    secret_hash: str
    created_at: datetime
    revoked_at: datetime | None

    @property
    def principal(self) -> str:
        """Who the key acts as: its maker, or (scoped to a group) the key's own member."""
        return self.owner if self.group_id is None else f"{PRINCIPAL_PREFIX}{self.id}"


class TooManyKeys(Conflict):
    """The maker already holds as many live keys as allowed; nothing was written."""


async def create_api_key(conn: asyncpg.Connection, *, key_id: UUID, name: str, owner: str,
                         group_id: UUID | None, role: str | None, secret_hash: str,
                         max_live_keys: int) -> ApiKeyRow:
    """A new key (a group key joins its group). Raises TooManyKeys."""
    async with conn.transaction():
        await conn.execute(sql("lock_user_api_keys"), owner)
        if await conn.fetchval(sql("count_live_api_keys"), owner) >= max_live_keys:
            raise TooManyKeys(f"at most {max_live_keys} live API keys per user: revoke one "
                              f"(DELETE /api-keys/{{id}}) before making another")
        key = ApiKeyRow.from_record(await conn.fetchrow(
            sql("insert_api_key"), key_id, name, owner, group_id, secret_hash))
        if group_id is not None:
            await conn.execute(sql("upsert_member"), group_id, key.principal, role, owner)
    return key


async def live_api_key(conn: asyncpg.Connection, key_id: UUID) -> ApiKeyRow | None:
    record = await conn.fetchrow(sql("live_api_key"), key_id)
    return ApiKeyRow.from_record(record) if record else None


async def list_api_keys(conn: asyncpg.Connection, owner: str | None) -> list[ApiKeyRow]:
    return [ApiKeyRow.from_record(r) for r in await conn.fetch(sql("list_api_keys"), owner)]


async def revoke_api_key(conn: asyncpg.Connection, key_id: UUID, owner: str | None) -> bool:
    """Revoke; a group key also leaves its group. False when there was no such live key."""
    async with conn.transaction():
        record = await conn.fetchrow(sql("revoke_api_key"), key_id, owner)
        if record is None:
            return False
        key = ApiKeyRow.from_record(record)
        if key.group_id is not None:
            await remove_member(conn, key.group_id, key.principal)
    return True
