"""The API's server keeps an idle connection open past the 5 s that clients such as httpx keep
theirs (api/serving.py): so it is the client that closes it, never the server while a request
is on its way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from waystation.api.serving import server_config
from waystation.testing import free_port


async def ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def served(config: uvicorn.Config) -> AsyncIterator[None]:
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        await task


async def get_twice(port: int, idle: float) -> list[bytes]:
    """Two requests on one connection, `idle` seconds apart: each answer's status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = []
    try:
        for pause in (0.0, idle):
            await asyncio.sleep(pause)
            writer.write(b"GET / HTTP/1.1\r\nHost: api\r\n\r\n")
            await writer.drain()
            lines.append(await reader.readline() or b"closed")
            if lines[-1] == b"closed":
                break
            await reader.readuntil(b"ok")
    except ConnectionError:
        lines.append(b"closed")
    finally:
        writer.close()
    return lines


# It waits out a client's keep-alive (6 s): the slow tier.
@pytest.mark.slow
async def test_an_idle_connection_outlives_an_http_client_s_keep_alive():
    """Both servers at once, one idle wait: the API's keeps the connection; uvicorn's default,
    what the setting is for, loses the second request."""
    ours, default = free_port(), free_port()
    async with served(server_config(ok, host="127.0.0.1", port=ours, log_level="warning")), \
            served(uvicorn.Config(ok, host="127.0.0.1", port=default, log_level="warning")):
        kept, closed = await asyncio.gather(get_twice(ours, idle=5.5),
                                            get_twice(default, idle=5.5))
    assert kept == [b"HTTP/1.1 200 OK\r\n"] * 2
    assert closed == [b"HTTP/1.1 200 OK\r\n", b"closed"]
