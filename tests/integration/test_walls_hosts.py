"""Issue 38 item 5 (a Host allow-list on every route) and issue 44 items 6-7 (MCP's `Origin`
check, `GET /mcp` refused), over real HTTP to the app under uvicorn, real Postgres. Temporal
is never reached: nothing below starts a run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from waystation.api.auth import issue_token
from waystation.settings import Settings
from waystation.testing import InProcessApi, free_port

SECRET = "hosts-api-secret-0123456789-0123456789-abc"
REBIND = "rebind.attacker.example:8000"
# Every kind of way in: REST, an SSE stream, the console, the docs, MCP, A2A and its card.
PATHS = [("GET", "/runs"), ("GET", "/decisions/stream"), ("GET", "/console/"),
         ("GET", "/openapi.json"), ("POST", "/mcp"), ("POST", "/a2a"),
         ("GET", "/.well-known/agent-card.json")]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}


@asynccontextmanager
async def serving(migrated_url: str, **settings: Any) -> AsyncIterator[InProcessApi]:
    api = InProcessApi(Settings(database_url=migrated_url, jwt_secret=SECRET,
                                temporal_address=f"127.0.0.1:{free_port()}", **settings))
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


def auth(user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


async def test_a_rebound_host_is_refused_on_every_way_in(migrated_url, pool):
    async with serving(migrated_url) as api, httpx.AsyncClient(base_url=api.url) as http:
        runs_before = await pool.fetchval("SELECT count(*) FROM runs")
        for method, path in PATHS:
            body = INITIALIZE if method == "POST" else None
            refused = await http.request(method, path, json=body,
                                         headers={**auth(), **MCP_HEADERS, "Host": REBIND})
            assert refused.status_code == 421, (path, refused.text)
            assert refused.json()["error"] == {
                "code": "host_not_allowed",
                "message": f"this server does not answer to host {REBIND!r}",
                "details": [{"host": REBIND}]}, path
            assert refused.headers["x-content-type-options"] == "nosniff"
        # Health probes answer whatever name they reach (a pod's IP): they tell nobody's data.
        for probe in ("/livez", "/healthz"):
            assert (await http.get(probe, headers={"Host": REBIND})).status_code != 421
        # A write behind a foreign Host writes nothing.
        started = await http.post("/runs", json={"kind": "validation", "input": {}},
                                  headers={**auth(), "Host": REBIND})
        assert started.status_code == 421
        assert await pool.fetchval("SELECT count(*) FROM runs") == runs_before
        # The loopback names, with or without a port, are this server's in dev.
        for host in (f"127.0.0.1:{api.port}", f"localhost:{api.port}", f"[::1]:{api.port}",
                     "localhost", "LOCALHOST"):
            served = await http.get("/runs", headers={**auth(), "Host": host})
            assert served.status_code == 200, (host, served.text)
        card = await http.get("/.well-known/agent-card.json")
        assert card.status_code == 200


async def test_allowed_hosts_name_the_deployment_s_hosts(migrated_url):
    # As in docker-compose: the service name beside a public domain and its subdomains.
    allowed = "api,.waystation.example,admin.example:8443"
    async with serving(migrated_url, allowed_hosts=allowed) as api, \
            httpx.AsyncClient(base_url=api.url) as http:
        for host, status in [("api:8000", 200), ("waystation.example", 200),
                             ("eu.waystation.example:443", 200), ("admin.example:8443", 200),
                             ("admin.example:8000", 421), ("evilwaystation.example", 421),
                             (f"127.0.0.1:{api.port}", 421), (REBIND, 421)]:
            answered = await http.get("/runs", headers={**auth(), "Host": host})
            assert answered.status_code == status, (host, answered.text)


async def test_mcp_refuses_a_foreign_origin_and_serves_its_own(migrated_url):
    origins = "https://agents.example"
    async with serving(migrated_url, console_url="https://waystation.example",
                       allowed_origins=origins, cors_origins="http://localhost:5173",
                       allowed_hosts="127.0.0.1,waystation.example") as api, \
            httpx.AsyncClient(base_url=api.url, headers={**auth(), **MCP_HEADERS}) as http:
        evil = await http.post("/mcp", json=INITIALIZE,
                               headers={"Origin": "http://evil.example.com"})
        assert evil.status_code == 403, evil.text
        assert evil.json()["error"]["code"] == "origin_not_allowed"
        assert evil.json()["error"]["details"] == [{"origin": "http://evil.example.com"}]
        # No credentials either: the origin is refused first, and says so.
        anonymous = await http.post("/mcp", json=INITIALIZE, headers={
            "Origin": "http://evil.example.com", "Authorization": ""})
        assert anonymous.status_code == 403
        for origin in (None, "https://waystation.example", "https://agents.example",
                       "http://localhost:5173", f"http://127.0.0.1:{api.port}"):
            headers = {"Origin": origin} if origin else {}
            served = await http.post("/mcp", json=INITIALIZE, headers=headers)
            assert served.status_code == 200, (origin, served.text)
            assert served.json()["result"]["tools"]
        # A same-looking origin on another port or scheme is another origin.
        for origin in ("http://waystation.example", "https://waystation.example:8443"):
            refused = await http.post("/mcp", json=INITIALIZE, headers={"Origin": origin})
            assert refused.status_code == 403, origin

        # Through the official client: a foreign origin gets no tools; the 403 is what it saw.
        statuses: list[int] = []

        async def seen(response: httpx2.Response) -> None:
            statuses.append(response.status_code)
        async with httpx2.AsyncClient(headers={**auth(), "Origin": "http://evil.example.com"},
                                      timeout=30, event_hooks={"response": [seen]}) as evil_http:
            with pytest.raises(Exception) as refused_client:  # noqa: B017, PT011
                async with Client(streamable_http_client(f"{api.url}/mcp",
                                                         http_client=evil_http)) as client:
                    await client.list_tools()
            assert refused_client.group_contains(MCPError)
            assert statuses and set(statuses) == {403}, statuses
        async with httpx2.AsyncClient(headers={**auth(), "Origin": "https://agents.example"},
                                      timeout=30) as good_http, \
                Client(streamable_http_client(f"{api.url}/mcp", http_client=good_http)) as client:
            assert (await client.list_tools()).tools


async def test_get_mcp_is_405_on_a_stateless_server(migrated_url):
    async with serving(migrated_url) as api, httpx.AsyncClient(base_url=api.url) as http:
        streamed = await http.get("/mcp", headers={**auth(), "Accept": "text/event-stream"})
        assert streamed.status_code == 405, streamed.text
        assert set(streamed.headers["allow"].replace(" ", "").split(",")) == {"POST", "DELETE"}
        assert streamed.json()["error"]["code"] == "method_not_allowed"



async def test_the_streamable_http_transport_s_musts(migrated_url):
    """The 2025-11-25 transport's server MUSTs that docs/mcp.md lists, over raw HTTP."""
    async with serving(migrated_url) as api, \
            httpx.AsyncClient(base_url=api.url, headers={**auth(), **MCP_HEADERS}) as http:
        answered = await http.post("/mcp", json=INITIALIZE)
        assert answered.status_code == 200
        assert answered.headers["content-type"].startswith("application/json")
        assert "mcp-session-id" not in answered.headers  # stateless: no session to manage
        for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 5, "result": {}}):
            accepted = await http.post("/mcp", json=message)
            assert accepted.status_code == 202 and accepted.content == b"", message
        unsupported = await http.post("/mcp", json=INITIALIZE,
                                      headers={"MCP-Protocol-Version": "1999-01-01"})
        assert unsupported.status_code == 400
        not_json = await http.post("/mcp", content=b"\xff\xfe{", headers={
            "Content-Type": "application/json"})
        assert 400 <= not_json.status_code < 500
        ended = await http.delete("/mcp")
        assert ended.status_code == 405
