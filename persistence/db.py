"""The asyncpg pool and the one place where driver errors become domain errors."""

from __future__ import annotations

import json
from typing import Any

import asyncpg


class PersistenceError(Exception):
    """Base of the read model's own errors."""


class NotFound(PersistenceError):
    pass


class Conflict(PersistenceError):
    pass


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, encoder=_dumps, decoder=json.loads, schema="pg_catalog"
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection
    )
    assert pool is not None
    return pool
