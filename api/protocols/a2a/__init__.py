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

from api.deps import authenticate_request
from api.errors import ApiError
from api.protocols.a2a.card import CARD_PATH, RPC_PATH, agent_card
from api.protocols.a2a.handler import WaystationHandler
from api.protocols.a2a.mapping import whole_numbers
from api.protocols.a2a.tasks import CallerContext
from waystation.registry import Registry


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
        request.state.a2a_params = await _params(request)
        return await dispatcher.handle_requests(request)

    return router


async def _params(request: Request) -> object:
    """The call's `params` as sent (starlette keeps the parsed body for the dispatcher, which
    answers a body that is not JSON-RPC itself)."""
    try:
        body = await request.json()
    except ValueError:
        return None
    return body.get("params") if isinstance(body, dict) else None
