"""Repository functions for the limits every API replica shares (migration 067)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from waystation.persistence.queries import sql


async def take_write(conn: asyncpg.Connection, caller: str, per_minute: int) -> float:
    """0 when `caller` may write now (one write is counted), else the seconds until it may."""
    return float(await conn.fetchval(sql("take_write"), caller, per_minute))


async def hold_stream(conn: asyncpg.Connection, lease: UUID, caller: str, *, most: int,
                      ttl_seconds: float) -> bool:
    """Hold (or move to `caller`) stream lease `lease` unless `caller` holds `most` others."""
    return bool(await conn.fetchval(sql("hold_stream"), lease, caller, most, ttl_seconds))


async def release_stream(conn: asyncpg.Connection, lease: UUID) -> None:
    await conn.execute(sql("release_stream"), lease)


async def renew_streams(conn: asyncpg.Connection, leases: list[UUID], ttl_seconds: float) -> None:
    """Leases still held live on; lapsed ones and idle buckets are forgotten."""
    await conn.execute(sql("renew_streams"), leases, ttl_seconds)
