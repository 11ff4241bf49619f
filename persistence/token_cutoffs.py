"""Repository functions for `token_cutoffs` (migration 035): which signed tokens of a user no
longer count. Rows are keyed by the SHA-256 of the user's name, so a cut-off outlives the
erasure of the name itself."""

from __future__ import annotations

import hashlib
from datetime import datetime

import asyncpg

from waystation.persistence.queries import sql


def _subject_hash(user: str) -> str:
    return hashlib.sha256(user.encode()).hexdigest()


async def cut_off_tokens(conn: asyncpg.Connection, user: str) -> None:
    """Every token of `user` issued until now stops working."""
    await conn.execute(sql("cut_off_tokens"), _subject_hash(user))


async def tokens_not_before(conn: asyncpg.Connection, user: str) -> datetime | None:
    """Tokens of `user` issued before this time no longer count; None: all of them do."""
    return await conn.fetchval(sql("token_not_before"), _subject_hash(user))
