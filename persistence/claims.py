"""Whom a connection's queries run for: the claims the row-level security policies read.

Migration 022 forces row-level security on every table a user can read. The API logs in as
role `waystation_api`, which sees only what a connection's claims allow (a run's owner, its
group's members, the `service` role; no claims, no rows); workers log in as
`waystation_worker`, which the policies let read and write everything. Neither may bypass
row-level security, own a table or change the schema (migration 070): only the owner, who
migrates, may (waystation.database.login_url gives each process its login). The claims are
set when a connection is
borrowed and cleared by the pool's `RESET ALL` when it goes back (an API-role pool resets
every connection it gets back; see waystation.persistence.db create_pool), so a connection never
carries one request's claims into the next. They are not transaction-local: a request commits
its writes before it calls Temporal (a run's row must exist when its workflow starts), so a
request is not one transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import asyncpg
from pydantic import BaseModel

from waystation.persistence.queries import sql

API_ROLE = "waystation_api"
WORKER_ROLE = "waystation_worker"

ClaimsRole = Literal["user", "service", "authenticator"]


class Claims(BaseModel):
    """`user` sees its runs and its groups' runs; `service` sees everything; `authenticator`
    sees only credentials (sign-in codes, sessions, API keys, mailed links), which are looked up
    by the secret they hold before anyone is known."""

    user: str | None = None
    role: ClaimsRole = "user"


SERVICE = Claims(role="service")
AUTHENTICATOR = Claims(role="authenticator")


async def set_claims(conn: asyncpg.Connection, claims: Claims) -> None:
    """One round trip; may be called again on the same connection to act as someone else."""
    await conn.execute(sql("set_claims"), claims.user, claims.role)


@asynccontextmanager
async def claimed_connection(pool: asyncpg.Pool,
                             claims: Claims) -> AsyncIterator[asyncpg.Connection]:
    """A connection of `pool` whose queries run for `claims` while it is borrowed."""
    async with pool.acquire() as conn:
        await set_claims(conn, claims)
        yield conn


async def set_login_password(conn: asyncpg.Connection, role: str, password: str) -> None:
    """As the owner: `role` may log in with `password` (an ALTER ROLE, idempotent)."""
    await conn.execute(await conn.fetchval(sql("login_password_statement"), role, password))
