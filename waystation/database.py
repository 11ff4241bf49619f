"""Where the read model lives: DATABASE_URL, or the embedded server in the data folder."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import asyncpg

from persistence.db import create_pool
from persistence.embedded import embedded_database_url
from persistence.migrate import apply_migrations
from waystation.settings import Settings


def resolve_database_url(settings: Settings) -> str:
    return settings.database_url or embedded_database_url(settings.embedded_pgdata)


async def migrate(url: str, folders: Iterable[Any] | None = None) -> list[int]:
    """The core's migrations and the kinds' (`folders`; default: those of the built-in and
    installed kinds)."""
    if folders is None:
        from waystation.registry import load_registry

        folders = load_registry().migration_folders()
    conn = await asyncpg.connect(url)
    try:
        return await apply_migrations(conn, folders=folders)
    finally:
        await conn.close()


__all__ = ["resolve_database_url", "migrate", "create_pool"]
