"""Waystation as an A2A agent (JSON-RPC binding of A2A 1.0, the `a2a-sdk` package).

`GET /.well-known/agent-card.json` is the agent card (no sign-in: it says how to sign in);
`POST /a2a` takes JSON-RPC calls, authenticated exactly as every API route (`get_user`), and
answers them through `handler.WaystationHandler` (streams as SSE). See docs/a2a.md.
"""

from __future__ import annotations

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from waystation.api.deps import authenticate_request
from waystation.api.errors import ApiError
from waystation.api.protocols.a2a.card import CARD_PATH, RPC_PATH, agent_card
from waystation.api.protocols.a2a.handler import WaystationHandler
from waystation.api.protocols.a2a.mapping import whole_numbers
from waystation.api.protocols.a2a.tasks import CallerContext
from waystation.api.rate_limits import count_call
from waystation.registry import Registry

# Each method's kind for the caller's limits (api/rate_limits.py), decided at dispatch: the
# streaming methods hold an open stream for as long as they answer; the reading methods count
# nothing; any other method (an unknown one too, refused by the SDK) counts as a write.
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})
READING_METHODS = frozenset({"GetTask", "ListTasks", "SubscribeToTask",
                             "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                             "GetExtendedAgentCard"})


def create_router(registry: Registry) -> APIRouter:
    """The card and the JSON-RPC endpoint for the registry's kinds, kept out of the OpenAPI
    document: they are the A2A protocol's, described by the card."""
    router = APIRouter(tags=["a2a"], include_in_schema=False)
    dispatcher = JsonRpcDispatcher(WaystationHandler(registry), context_builder=CallerContext())

    @router.get(CARD_PATH)
    async def get_agent_card(request: Request) -> JSONResponse:
        """The agent card, its interface URL on the address the caller used."""
        card = agent_card_to_dict(agent_card(registry, str(request.base_url),
                                             request.app.state.settings))
        return JSONResponse(whole_numbers(card))

    @router.post(RPC_PATH)
    async def a2a_rpc(request: Request) -> Response:
        """A JSON-RPC call by a caller signed in as for every API route (else a 401 in the
        API's error shape, naming the scheme as A2A asks)."""
        try:
            request.state.a2a_user = await authenticate_request(request)
        except ApiError as refused:
            if refused.status == 401:
                refused.headers = {**(refused.headers or {}), "WWW-Authenticate": "Bearer"}
            raise
        method, request.state.a2a_params = await _call(request)
        await count_call(request.scope, write=method not in READING_METHODS,
                         stream=method in STREAMING_METHODS)
        return await dispatcher.handle_requests(request)

    return router


async def _call(request: Request) -> tuple[str | None, object]:
    """The call's method and `params` as sent; None for a body that is no single call (the
    dispatcher refuses a batch or malformed JSON itself). The body is read once: the
    dispatcher reads it again from the request's cache."""
    try:
        body = await request.json()
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    method = body.get("method")
    return (method if isinstance(method, str) else None), body.get("params")
