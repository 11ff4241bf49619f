"""The asyncpg pool and the one place where driver errors become domain errors."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from asyncpg.exceptions import AdminShutdownError, CannotConnectNowError, CrashShutdownError

log = logging.getLogger(__name__)

T = TypeVar("T")

# The database cannot be reached right now (a restart, a failover, the network), as opposed
# to a statement it refused: worth waiting out rather than failing the work.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    OSError,  # refused, no socket file, timeouts
    asyncpg.PostgresConnectionError,  # includes "connection was closed in the middle"
    AdminShutdownError, CrashShutdownError, CannotConnectNowError,  # shutting down / starting
)


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


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A login-role pool's release: asyncpg has rolled back any open transaction already."""


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10,
                      role: str | None = None) -> asyncpg.Pool:
    """With `role`, every connection acts as that role from its start (see persistence/claims.py:
    the API's and the workers' roles); the login role must be a member of it.

    A `role` pool (the API's) resets each connection it gets back (`RESET ALL`, unlisten,
    advisory locks), so one borrower's claims never reach the next. A pool without acts as the
    login role (workers, the CLI), which row-level security lets see everything whatever the
    claims, sets no session state, and listens on connections of its own: its connections go
    back with only the rollback asyncpg always does, sparing every borrow a round trip
    (measured on a mobile step, see docs/benchmarks.md, "Mobile exploration")."""
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection,
        server_settings={"role": role} if role else None,
        reset=None if role else _keep_session,
    )
    assert pool is not None
    return pool


# Releases under way (see `release_soon`): held so that none is garbage-collected unfinished.
_RELEASING: set[asyncio.Task[None]] = set()


def release_soon(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    """Give `conn` back to `pool` without waiting for it: an API-role pool resets each
    connection it gets back (`RESET ALL`, a round trip), which a request borrowing a
    connection for one lookup (its caller's credential, the rate limit) need not wait for
    before its next step. The connection is in the pool again, for the next borrower, only
    once reset; one that cannot be reset is closed by the pool, as when awaited."""
    task = asyncio.get_running_loop().create_task(_release(pool, conn))
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


async def _release(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    try:
        await pool.release(conn)
    except Exception as error:  # noqa: BLE001 - nobody awaits this: logged, not lost
        log.warning("a pooled connection could not be reset, and was closed: %s", error)


async def retry_while_unavailable(call: Callable[[], Awaitable[T]], *,
                                  give_up_after: float = 300.0) -> T:
    """`call()`, again and again while the database is unreachable (backing off to 5 s), for
    at most `give_up_after` seconds. Only for idempotent writes: a commit whose answer was
    lost is applied again."""
    delay, deadline = 0.2, time.monotonic() + give_up_after
    while True:
        try:
            return await call()
        except UNAVAILABLE_ERRORS as error:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("database unavailable (%s: %s); retrying in %.1fs",
                        type(error).__name__, error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
