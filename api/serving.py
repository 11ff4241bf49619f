"""How the API is served: uvicorn's configuration, for `waystation api` and the tests' API.

An idle connection is kept open 75 s: longer than the clients and proxies in front of the API
keep theirs (httpx 5 s, nginx's and AWS load balancers' 60 s), so it is they who close it.
uvicorn's default, 5 s, equals httpx's: a client reusing a connection just as the server
closes it loses the request ("Server disconnected without sending a response", or a read
error), which the server never saw. Seen as a failed `bench_human` (an SSE stream's GET
lost); in a probe, 60 httpx clients idle about 5 s between requests lost 2 of 180 requests
with the default and none with 75 s.
"""

from __future__ import annotations

from typing import Any

import uvicorn

KEEP_ALIVE_SECONDS = 75


def server_config(app: Any, *, host: str, port: int, **options: Any) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                          **options)
