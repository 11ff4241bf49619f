"""The MCP server at `/mcp` (Streamable HTTP, the official SDK's low-level `Server`).

Every request is authenticated before the SDK sees it, by the code every route uses
(`waystation.api.deps.authenticate_request`: a bearer JWT, an identity provider's JWT, an API key);
a caller it refuses gets the API's 401 with `WWW-Authenticate`, pointing, when an identity
provider is configured, at this resource's OAuth protected-resource metadata (RFC 9728, as
MCP's authorization spec asks). The server keeps no session: a 2026-07-28 request stands
alone, and a handshake-era client is served statelessly too, so nothing ties one request to
the next but the caller's credentials.

Every answer is plain JSON but one: a `tasks/result` that asks for progress (a
`progressToken` in its `_meta`) from a client that accepts `text/event-stream` is answered on
an SSE stream, carrying `notifications/progress` with the answer being written (issue 43).
The SDK's transport answers all JSON or all SSE per session manager, so there are two over
the one server, and `McpEndpoint` picks one per request by its body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, TypeVar

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from mcp_types import (
    CallToolRequestParams,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
)
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from waystation.api.deps import authenticate_request
from waystation.api.errors import ApiError
from waystation.api.hosts import origin_allowed
from waystation.api.protocols.mcp import mapping, tasks
from waystation.api.rate_limits import count_call
from waystation.registry import Registry
from waystation.settings import Settings

PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
INSTRUCTIONS = (
    "Waystation runs long AI-agent work durably and stops at human decisions (gates). Start a "
    "run with start_run (list_run_kinds gives each kind's input schema), follow it with "
    "get_run or read_events, and answer its gates with decide (list_pending_decisions lists "
    "what waits for you). A refused call is a tool error whose text is "
    '{"error": {"code", "message"}}, with the code the REST API answers.')


def build_server(registry: Registry) -> Server[Any]:
    """The tools, resources and task methods of `mapping` and `tasks`."""
    tools = mapping.Tools(registry)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: PaginatedRequestParams | None) -> ListToolsResult:
        return tools.listing

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: CallToolRequestParams) -> HandlerResult:
        caller = mapping.Caller.of(ctx.request)
        spec = tools.specs.get(params.name)
        if spec is not None and not spec.read_only:
            await counted_write(ctx)
        result = await tools.call(caller, params.name, params.arguments or {})
        if params.name == "start_run" and not result.is_error and tasks.accepts_tasks(ctx):
            assert result.structured_content is not None, "start_run answers RunCreated"
            return await tasks.created_task(caller, result.structured_content["run_id"])
        return result

    async def list_resources(ctx: ServerRequestContext[Any],
                             params: PaginatedRequestParams | None) -> ListResourcesResult:
        return await mapping.list_resources(mapping.Caller.of(ctx.request))

    async def list_templates(ctx: ServerRequestContext[Any], params: PaginatedRequestParams
                             | None) -> ListResourceTemplatesResult:
        return mapping.resource_templates(mapping.Caller.of(ctx.request).registry)

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: ReadResourceRequestParams) -> ReadResourceResult:
        return await mapping.read_resource(mapping.Caller.of(ctx.request), params.uri)

    server: Server[Any] = Server(
        "waystation", version=version("waystation"), title="Waystation",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schemas.get,
        on_list_tools=list_tools, on_list_resources=list_resources,
        on_list_resource_templates=list_templates, on_read_resource=read_resource)
    server.add_request_handler("tools/call", CallToolRequestParams, call_tool)
    server.add_request_handler("tasks/get", tasks.TaskParams, tasks.get_task)
    server.add_request_handler("tasks/update", tasks.TaskUpdateParams,
                               writing(tasks.update_task))
    server.add_request_handler("tasks/cancel", tasks.TaskParams, writing(tasks.cancel_task))
    server.add_request_handler(tasks.RESULT_METHOD, tasks.TaskParams, tasks.task_result)
    server.extensions[tasks.TASKS_EXTENSION] = {}
    return server


async def counted_write(ctx: ServerRequestContext[Any]) -> None:
    """Counts a writing call against its caller's writes per minute (api/rate_limits.py);
    over the limit, the protocol's error carrying the API's 429 body, before anything is done.
    Reading calls count nothing."""
    assert ctx.request is not None, "Waystation serves MCP over HTTP only"
    with mapping.protocol_errors("MCP write"):
        await count_call(ctx.request.scope, write=True, stream=False)


P = TypeVar("P")


def writing(handler: Callable[[ServerRequestContext[Any], P], Awaitable[Any]]
            ) -> Callable[[ServerRequestContext[Any], P], Awaitable[Any]]:
    """`handler`, counted as a write (`counted_write`) first."""
    async def counted(ctx: ServerRequestContext[Any], params: P) -> Any:
        await counted_write(ctx)
        return await handler(ctx, params)
    return counted


@dataclass(frozen=True)
class Sessions:
    """The SDK's transport over the one server: `json` answers every request but those
    `streamed` answers, as SSE (see `streams_progress`)."""

    json: StreamableHTTPSessionManager
    streamed: StreamableHTTPSessionManager


def streams_progress(request: Request, body: bytes) -> bool:
    """Whether a request is a `tasks/result` asking for progress (`_meta.progressToken`), by
    a client that takes an SSE answer: the one request answered on a stream."""
    if "text/event-stream" not in request.headers.get("accept", ""):
        return False
    try:
        call = json.loads(body)
    except ValueError:
        return False  # the SDK answers the parse error
    if not isinstance(call, dict) or call.get("method") != tasks.RESULT_METHOD:
        return False
    params = call.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


def replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body already read given again first (then the client's
    disconnect, which the SSE answer watches for)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replay


class McpEndpoint:
    """`/mcp`: the caller authenticated as by every route, then the SDK's transport."""

    def __init__(self, sessions: Sessions, *,
                 metadata_url: str | None, allowed_origins: list[str]) -> None:
        self.sessions = sessions
        self.metadata_url = metadata_url
        self.allowed_origins = allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        # The transport's MUST: a browser page of another origin is refused before its
        # credentials are even read (the Host was checked by the app, waystation.api.hosts).
        origin = request.headers.get("origin")
        if not origin_allowed(origin, request.headers.get("host"), self.allowed_origins):
            raise ApiError(403, "origin_not_allowed",
                           f"origin {origin!r} may not call {PATH}",
                           details=[{"origin": origin}])
        try:
            scope[mapping.USER_SCOPE_KEY] = await authenticate_request(request)
        except ApiError as error:
            if error.status != 401:
                raise
            # The app's handler answers it with the API's error body.
            raise ApiError(401, error.code, error.message, details=error.details,
                           headers={"WWW-Authenticate": self._challenge(request, error)}
                           ) from error
        if request.method != "POST":
            await self.sessions.json.handle_request(scope, receive, send)
            return
        body = await request.body()
        sessions = self.sessions.json
        if streams_progress(request, body):
            sessions, scope[tasks.STREAMED_SCOPE_KEY] = self.sessions.streamed, True
        await sessions.handle_request(scope, replaying(body, receive), send)

    def _challenge(self, request: Request, error: ApiError) -> str:
        """RFC 6750's challenge: the refusal when a credential was sent, and where to get
        one (RFC 9728) when an identity provider issues them."""
        params = []
        if "authorization" in request.headers:
            params += ['error="invalid_token"', f'error_description="{error.code}"']
        if self.metadata_url is not None:
            params.append(f'resource_metadata="{self.metadata_url}"')
        return "Bearer " + ", ".join(params) if params else "Bearer"


def mount_mcp(app: Starlette, registry: Registry, settings: Settings) -> Sessions:
    """Adds `/mcp` (and, with an identity provider, the protected-resource metadata) to the
    app; the session managers returned must run in the app's lifespan."""
    server = build_server(registry)
    # The SDK's DNS-rebinding lists replaced by ours, not dropped: the app answers only to
    # WAYSTATION_ALLOWED_HOSTS on every route (waystation.api.hosts.TrustedHosts) and McpEndpoint
    # checks `Origin` against the same allowed origins as the rest of the API; the SDK's own lists
    # would be a second copy of both settings to keep in step.
    sessions = Sessions(*(StreamableHTTPSessionManager(
        app=server, stateless=True, json_response=json_response,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        for json_response in (True, False)))
    metadata = protected_resource(settings)
    metadata_url = f"{settings.console_base}{METADATA_PATH}{PATH}" if metadata else None
    # No GET: a stateless server has nothing to send on a stream of its own, and the
    # transport lets it answer 405 (Starlette does, with `Allow`).
    routes = [Route(PATH, McpEndpoint(sessions, metadata_url=metadata_url,
                                      allowed_origins=settings.allowed_origin_list),
                    methods=["POST", "DELETE"])]
    if metadata is not None:
        document = metadata.model_dump(mode="json", exclude_none=True)

        async def resource_metadata(request: Request) -> JSONResponse:
            return JSONResponse(document)
        # RFC 9728's location for the resource `/mcp`, and the bare one older clients try.
        routes += [Route(METADATA_PATH + PATH, resource_metadata, methods=["GET"]),
                   Route(METADATA_PATH, resource_metadata, methods=["GET"])]
    app.router.routes.extend(routes)
    return sessions


@asynccontextmanager
async def serving(sessions: Sessions) -> AsyncIterator[None]:
    """Runs the SDK's session managers while the app's lifespan lasts, in a task of their own:
    their task groups must be left by the task that entered them, and a lifespan may be
    entered and left by different tasks (a test fixture's setup and teardown)."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with AsyncExitStack() as running:
            for manager in (sessions.json, sessions.streamed):
                await running.enter_async_context(manager.run())
            started.set()
            await stop.wait()

    task = asyncio.create_task(serve(), name="mcp-sessions")
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()  # it could not start: raise why
    try:
        yield
    finally:
        stop.set()
        await task


def protected_resource(settings: Settings) -> ProtectedResourceMetadata | None:
    """With an identity provider (WAYSTATION_JWKS_URL): this resource and the authorization
    server whose tokens it accepts."""
    if settings.jwks_url is None or settings.jwt_issuer is None:
        return None
    return ProtectedResourceMetadata(
        resource=AnyHttpUrl(settings.console_base + PATH),
        authorization_servers=[AnyHttpUrl(settings.jwt_issuer)],
        resource_name="Waystation", bearer_methods_supported=["header"])
