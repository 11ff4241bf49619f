"""Outbound webhooks: register, list, stop, and read their delivery log."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from waystation.api.deps import Conn, CurrentUser, SettingsDep
from waystation.api.services import webhooks
from waystation.api.webhook_schemas import (
    DeliveryList,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
)

router = APIRouter(prefix="/webhooks", tags=["webhooks"])


@router.post("", status_code=201, response_model=WebhookCreated)
async def create_webhook(body: WebhookCreate, user: CurrentUser, conn: Conn,
                         settings: SettingsDep) -> WebhookCreated:
    """Register a webhook for the caller's runs, or a group's; the secret is shown only here.
    422 `webhook_url_refused` for a host that is or resolves to an address a webhook may not
    go to (link-local, a cloud metadata service; loopback, private and CGNAT ones unless
    allowed, see activities/webhook_targets.py)."""
    return await webhooks.create_webhook(conn, user, body, settings=settings)


@router.get("", response_model=WebhookList)
async def list_webhooks(user: CurrentUser, conn: Conn) -> WebhookList:
    """The webhooks the caller registered (every one for the service role), without secrets."""
    return await webhooks.list_webhooks(conn, user)


@router.delete("/{webhook_id}", status_code=204, response_class=Response)
async def delete_webhook(webhook_id: UUID, user: CurrentUser, conn: Conn) -> Response:
    """Stop a webhook; deliveries not yet made are canceled."""
    await webhooks.delete_webhook(conn, user, webhook_id)
    return Response(status_code=204)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList)
async def list_deliveries(webhook_id: UUID, user: CurrentUser, conn: Conn,
                          limit: Annotated[int, Query(ge=1, le=500)] = 100) -> DeliveryList:
    """The webhook's delivery log, newest first: status, attempts, last answer."""
    return await webhooks.deliveries(conn, user, webhook_id, limit)
