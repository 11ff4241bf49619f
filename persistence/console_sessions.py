"""Repository functions for the console's sign-in codes and browser sessions.

Callers hand over the secrets themselves (a code, a session id); only their SHA-256 hashes
reach the database, so a leaked table or backup signs nobody in.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

import asyncpg
from pydantic import BaseModel

from waystation.persistence.queries import sql

ConsoleRole = Literal["user", "service"]


class ConsoleIdentity(BaseModel):
    user_name: str
    role: ConsoleRole


class ConsoleSession(ConsoleIdentity):
    csrf_token: str
    expires_at: datetime


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def create_login_code(conn: asyncpg.Connection, code: str, identity: ConsoleIdentity,
                            *, ttl_seconds: float) -> None:
    await conn.execute(sql("insert_login_code"), _hash(code), identity.user_name,
                       identity.role, ttl_seconds)


async def use_login_code(conn: asyncpg.Connection, code: str) -> ConsoleIdentity | None:
    """The code's identity if it is unused and unexpired; the code is spent either way."""
    record = await conn.fetchrow(sql("use_login_code"), _hash(code))
    return ConsoleIdentity.model_validate(dict(record)) if record else None


async def create_session(conn: asyncpg.Connection, session_id: str, identity: ConsoleIdentity,
                         *, csrf_token: str, ttl_seconds: float) -> None:
    await conn.execute(sql("insert_console_session"), _hash(session_id), identity.user_name,
                       identity.role, csrf_token, ttl_seconds)


async def get_session(conn: asyncpg.Connection, session_id: str) -> ConsoleSession | None:
    record = await conn.fetchrow(sql("get_console_session"), _hash(session_id))
    return ConsoleSession.model_validate(dict(record)) if record else None


async def revoke_session(conn: asyncpg.Connection, session_id: str) -> None:
    await conn.execute(sql("revoke_console_session"), _hash(session_id))


async def delete_stale(conn: asyncpg.Connection) -> None:
    await conn.execute(sql("delete_stale_console_rows"))
