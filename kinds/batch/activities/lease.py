"""One pooled connection for a run of items, let go while an agent is slow.

A slice of fast items spends most of its time in Postgres; taking a connection from the pool
for every statement would add a reset round trip each time. So a slice keeps one connection
while agents answer quickly, and hands it back the moment an agent call outlasts
`HOLD_SECONDS`: slow (real) agents then never hold a connection while they think, and
`max_workers` above the pool size still means that many agents at work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import TracebackType
from typing import TypeVar

import asyncpg

HOLD_SECONDS = 0.02
T = TypeVar("T")


class ConnectionLease:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._conn: asyncpg.Connection | None = None

    async def conn(self) -> asyncpg.Connection:
        """The leased connection, taken from the pool again if it was given back."""
        if self._conn is None:
            self._conn = await self._pool.acquire()
        return self._conn

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._pool.release(conn)

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Await an agent call, giving the connection back if it is not done at once."""
        call = asyncio.ensure_future(awaitable)
        try:
            if self._conn is not None:
                done, _ = await asyncio.wait({call}, timeout=HOLD_SECONDS)
                if not done:
                    await self.release()
            return await call
        finally:
            if not call.done():
                call.cancel()

    async def __aenter__(self) -> ConnectionLease:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.release()
