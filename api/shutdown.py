"""The moment the API process is told to stop, before uvicorn waits for open responses.

uvicorn's graceful shutdown stops accepting connections, then waits for every response in
flight to finish. An SSE stream never finishes by itself, so without this one open browser
tab holds the process until it is killed. Streams end on `begin()` instead (a client resumes
elsewhere with Last-Event-ID, losing nothing) and readiness answers 503 meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn


class Shutdown:
    def __init__(self) -> None:
        self.begun = False
        self._callbacks: list[Callable[[], None]] = []

    def on_begin(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def begin(self) -> None:
        """Run the callbacks once, on the event loop's thread."""
        if self.begun:
            return
        self.begun = True
        for callback in self._callbacks:
            callback()


class ApiServer(uvicorn.Server):
    """uvicorn's server, which also begins the app's `Shutdown` when a stop signal arrives."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        super().__init__(config)
        self._shutdown = shutdown
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # A signal handler may run between any two bytecodes of the loop's own work: hand
        # the callbacks to the loop rather than touching its state from here.
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._shutdown.begin)
