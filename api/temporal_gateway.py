"""The API's Temporal client, connected lazily so the API starts (and says 503) while
Temporal is down, and reconnects once it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio.client import Client

from waystation.api.errors import unavailable


class TemporalGateway:
    def __init__(self, connect: Callable[[], Awaitable[Client]]) -> None:
        self._connect = connect
        self._client: Client | None = None
        self._lock = asyncio.Lock()

    async def client(self) -> Client:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                try:
                    self._client = await asyncio.wait_for(self._connect(), timeout=5)
                except (RuntimeError, OSError, TimeoutError) as error:
                    raise unavailable(f"Temporal is unreachable: {error}") from error
            return self._client
