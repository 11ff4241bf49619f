"""Where the read model lives: DATABASE_URL, or the embedded server in the data folder."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg

from waystation.persistence.claims import API_ROLE, WORKER_ROLE, set_login_password
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url
from waystation.persistence.migrate import apply_migrations
from waystation.settings import Settings


def resolve_database_url(settings: Settings) -> str:
    return settings.database_url or embedded_database_url(settings.embedded_pgdata)


def login_url(settings: Settings, role: str) -> str:
    """Where a process of `role` (API_ROLE, WORKER_ROLE) logs in: the database of
    DATABASE_URL (or the embedded server's), as `role`, with its password setting; a
    DATABASE_URL that already names `role` keeps its own password unless one is set."""
    url = resolve_database_url(settings)
    password = _passwords(settings).get(role)
    parts = urlsplit(url)
    if parts.username == role and password is None:
        return url
    login = quote(role, safe="") + (f":{quote(password, safe='')}" if password else "")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))


def _passwords(settings: Settings) -> dict[str, str | None]:
    return {API_ROLE: settings.api_database_password,
            WORKER_ROLE: settings.worker_database_password}


async def migrate(url: str, folders: Iterable[Any] | None = None, *,
                  settings: Settings | None = None) -> list[int]:
    """The core's migrations and the kinds' (`folders`; default: those of the built-in and
    installed kinds), as `url`'s user, the owner; with `settings`, then the login roles'
    passwords it gives."""
    if folders is None:
        from waystation.registry import load_registry

        folders = load_registry().migration_folders()
    conn = await asyncpg.connect(url)
    try:
        applied = await apply_migrations(conn, folders=folders)
        for role, password in (_passwords(settings) if settings else {}).items():
            if password is not None:
                await set_login_password(conn, role, password)
        return applied
    finally:
        await conn.close()


__all__ = ["resolve_database_url", "login_url", "migrate", "create_pool"]
